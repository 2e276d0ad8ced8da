"""Read-side queries of the API: filtered job lists and attempt histories."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, cast

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

from .filters import JobFilter
from .models import Job, JobAttempt
from .representation import format_time, with_job_objects
from .state import JobNotFound, JobValidationError

# Query parameters of list routes that are not filters.
LIST_PARAMS = frozenset({"page", "limit", "cursor", "format"})
# Lists count the jobs they match exactly up to this many; above, the count is PostgreSQL's
# estimate, since an exact count reads every matching row (a million rows: ~100 ms).
EXACT_COUNT_LIMIT = 10_000


def job_list(params: Mapping[str, Any], *, dlq_only: bool = False) -> QuerySet[Job]:
    """Jobs matching the `GET /jobs` query `params`, ordered, with their job objects.

    An unknown parameter, an empty one or a value that does not parse is a
    JobValidationError naming it: a typo must not silently widen the list.
    """
    errors = JobFilter.unknown(params, also=LIST_PARAMS)
    for name, value in params.items():
        if value == "" and name not in errors:
            errors[name] = ["Empty: give a value, or leave the parameter out."]
    queryset = Job.objects.filter(in_dlq=True) if dlq_only else Job.objects.all()
    filterset = JobFilter(params, queryset=queryset)
    if not filterset.is_valid():
        errors.update({name: list(messages) for name, messages in filterset.errors.items()})
    if errors:
        raise JobValidationError(errors)
    return with_job_objects(filterset.qs)


def bounded_count(queryset: QuerySet[Any]) -> tuple[int, bool]:
    """(how many rows `queryset` has, whether that is exact): exact up to EXACT_COUNT_LIMIT
    rows (a count over at most that many + 1, through the index its filter uses), else the
    planner's estimate, never below the limit + 1. Never a count of every matching row."""
    limit = EXACT_COUNT_LIMIT
    unordered = queryset.order_by().values("pk")
    seen = unordered[: limit + 1].count()
    if seen <= limit:
        return seen, True
    plan = json.loads(unordered.explain(format="json"))
    return max(limit + 1, int(plan[0]["Plan"]["Plan Rows"])), False


class BoundedCountPaginator(Paginator):
    """Django's paginator with `bounded_count`: the admin's change lists and the console's
    lists page through a million jobs without counting them all on every page."""

    @cached_property
    def count(self) -> int:
        return bounded_count(cast("QuerySet[Any]", self.object_list))[0]


def job_attempts(job_id: uuid.UUID) -> list[dict[str, Any]]:
    """The attempts of a job, oldest first. Raises JobNotFound for an unknown job."""
    attempts = list(
        JobAttempt.objects.filter(job_id=job_id).order_by("attempt_number", "started_at")
    )
    if not attempts and not Job.objects.filter(id=job_id).exists():
        raise JobNotFound(job_id)
    return [represent_attempt(attempt) for attempt in attempts]


def represent_attempt(attempt: JobAttempt) -> dict[str, Any]:
    return {
        "attempt_number": attempt.attempt_number,
        "status": attempt.status,
        "started_at": format_time(attempt.started_at),
        "finished_at": format_time(attempt.finished_at),
        "duration_ms": attempt.duration_ms,
        "error_type": attempt.error_type,
        "error_message": attempt.error_message,
        "stack_trace": attempt.stack_trace,
        "worker_id": None if attempt.worker_id is None else str(attempt.worker_id),
    }
