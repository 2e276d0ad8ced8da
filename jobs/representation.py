"""The job object of the API and of every `job.*` event, built in one place."""

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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


def _id(value: Any) -> str | None:
    return None if value is None else str(value)


def represent_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The job object from a raw SQL `jobs` row (column names, plus `depends_on`).

    Django's psycopg connections hand jsonb over as text, so `payload` and `result` are
    decoded here. A result that is itself a JSON string arrives quoted and stays a string.
    """
    return represent_values(
        {
            **row,
            "payload": json.loads(row["payload"]),
            "result": None if row["result"] is None else json.loads(row["result"]),
        }
    )


def represent_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """The job object from already-decoded column values (column names, plus `depends_on`)."""
    return {
        "id": str(row["id"]),
        "type": row["type"],
        "payload": row["payload"],
        "priority": row["priority"],
        "status": row["status"],
        "attempt_count": row["attempt_count"],
        "max_retries": row["max_retries"],
        "scheduled_at": format_time(row["scheduled_at"]),
        "recur_interval": row["recur_interval"],
        "depends_on": _id(row.get("depends_on")),
        "in_dlq": row["in_dlq"],
        "created_at": format_time(row["created_at"]),
        "updated_at": format_time(row["updated_at"]),
        "started_at": format_time(row["started_at"]),
        "completed_at": format_time(row["completed_at"]),
        "cancelled_at": format_time(row["cancelled_at"]),
        "next_retry_at": format_time(row["next_retry_at"]),
        "last_error": row["last_error"],
        "result": row["result"],
        "worker_id": _id(row["worker_id"]),
    }


def represent_job(job: Job) -> dict[str, Any]:
    """The job object from a model instance (prefetch `dependencies` for lists)."""
    row = {field.attname: getattr(job, field.attname) for field in Job._meta.concrete_fields}
    row["depends_on"] = job.depends_on_id
    return represent_values(row)
