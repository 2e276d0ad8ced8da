"""The job object of the API and of every `job.*` event.

Its shape is written once, as the SQL function `scheduler_job_object` (`jobs/sql/schema.sql`):
transitions return it from their statements, and reads attach it to their querysets here.
"""

import json
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from .models import Job


class EncodedJob(dict[str, Any]):
    """A job object that keeps the JSON text it was decoded from, so that publishing it
    does not encode it again (the worker's hot statements build it in SQL, and encoding
    two events per job was a tenth of the worker's CPU). Never changed once made: the text
    would no longer match."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        super().__init__(json.loads(text))
        self.text = text


def format_time(value: datetime | None) -> str | None:
    """ISO 8601 UTC with millisecond precision: `2026-06-11T00:00:00.000Z`."""
    if value is None:
        return None
    return (
        value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    )


# The job object of each row, built by the one definition of its shape (`schema.sql`).
_JOB_OBJECT = RawSQL("scheduler_job_object(jobs)::text", ())


def with_job_objects(queryset: QuerySet[Job]) -> QuerySet[Job]:
    """`queryset` with each job's API object attached, for `represent_job`."""
    return queryset.annotate(job_object=_JOB_OBJECT)


def represent_job(job: Job) -> dict[str, Any]:
    """The job object of a job read through `with_job_objects`."""
    return EncodedJob(job.job_object)  # type: ignore[attr-defined]
