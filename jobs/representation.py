"""The job object of the API and of every `job.*` event.

Its shape is written once, as the SQL function `scheduler_job_object` (`jobs/sql/schema.sql`):
transitions return it from their statements, and reads attach it to their querysets here.
"""

import json
from datetime import UTC, datetime
from typing import Any

import orjson
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
        super().__init__(decode_job_object(text))
        self.text = text


# The largest magnitude orjson keeps as an integer: past it, it returns a float.
_BEYOND_64_BITS = 2**63


def decode_job_object(text: str) -> dict[str, Any]:
    """The job object of `text`, as `json.loads` would return it, in about half its time.

    orjson decodes every transition's job objects (the worker decodes two per job), but it
    turns an integer beyond 64 bits into a float, where `json.loads` keeps it exact: a
    payload or result holding such a float-looking value is decoded again by `json.loads`,
    as is a text orjson refuses (a number beyond a double's range, which `json.loads` reads
    as infinity). The other fields are the shape's own: ids, times, small integers."""
    try:
        job: dict[str, Any] = orjson.loads(text)
    except orjson.JSONDecodeError:
        return dict(json.loads(text))
    if _may_be_a_long_integer(job.get("payload")) or _may_be_a_long_integer(job.get("result")):
        return dict(json.loads(text))
    return job


def _may_be_a_long_integer(value: Any) -> bool:
    if not value:
        return False  # most payloads are {} and most results None: no walk
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and abs(item) >= _BEYOND_64_BITS and item.is_integer():
            return True
    return False


# Digits of a job's id shown where the whole id would not fit (the console, messages).
SHORT_ID_DIGITS = 8


def short_id(job_id: object) -> str:
    """The last digits of a job's id: its random part. A job id is a UUIDv7, which begins
    with its creation time, so its first digits are the same for every job of a minute."""
    return str(job_id)[-SHORT_ID_DIGITS:]


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
