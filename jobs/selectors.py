"""Read-side queries of the API: filtered job lists and attempt histories."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from django.core.paginator import EmptyPage, Page, Paginator
from django.db.models import Model, Q, QuerySet, TextField
from django.db.models.functions import Cast, Right
from django.db.models.lookups import Exact
from django.utils.functional import cached_property

from .filters import DLQ, JobFilter, status_condition
from .models import Job, JobAttempt
from .representation import SHORT_ID_DIGITS, format_time, with_job_objects
from .sql import fetch
from .state import JobNotFound, JobValidationError

# Lists count the jobs they match exactly up to this many; above, the count is PostgreSQL's
# estimate, since an exact count reads every matching row (a million rows: ~100 ms).
EXACT_COUNT_LIMIT = 10_000
# PostgreSQL's OFFSET and LIMIT are bigints: a page starting further is past the end of any
# table it can hold.
MAX_OFFSET = 2**63 - 1

ModelT = TypeVar("ModelT", bound=Model)

# The end of a job's id as the console shows it (`short_id`), up to its whole last group.
_ID_END = re.compile(rf"[0-9a-f]{{{SHORT_ID_DIGITS},12}}")


def stored_job_types() -> list[str]:
    """The types of the jobs in the table, in order, whether or not this process registers
    them (a filter's choices: `stored_job_types` in jobs/sql/queries.sql)."""
    return [row["type"] for row in fetch("stored_job_types", {})]


def id_ends_with(term: str) -> Q | None:
    """Jobs whose id ends with `term` when it is a short id as the console shows it (in any
    case), else None: the console's DLQ search and the admin's. No index holds an id's end,
    so each caller bounds the rows it is tested on."""
    lowered = term.lower()
    if not _ID_END.fullmatch(lowered):
        return None
    return Q(Exact(Right(Cast("id", TextField()), len(lowered)), lowered))


def job_list(params: Mapping[str, Any], *, dlq_only: bool = False) -> QuerySet[Job]:
    """Jobs matching the `GET /jobs` query `params`, ordered, with their job objects.

    An empty parameter or a value that does not parse is a JobValidationError naming it.
    `params` holds only the filters and the pagination: `ApiView` has refused every other
    parameter, by the list's declared ones (`jobs.api.schema.list_parameters`, built from
    `JobFilter`), so that no route keeps a list of its own.
    """
    errors = {
        name: ["Empty: give a value, or leave the parameter out."]
        for name, value in params.items()
        if value == ""
    }
    # The DLQ as `status=dlq` means it, so that its page is one range of
    # `jobs_status_created_idx`: `in_dlq` alone walked `jobs_created_idx` over every newer job.
    queryset = Job.objects.filter(status_condition(DLQ)) if dlq_only else Job.objects.all()
    filterset = JobFilter(params, queryset=queryset)
    if not filterset.is_valid():
        errors.update({name: list(messages) for name, messages in filterset.errors.items()})
    if errors:
        raise JobValidationError(errors)
    return with_job_objects(filterset.qs)


def page_rows(
    queryset: QuerySet[ModelT], start: int, stop: int, after: Q | None = None
) -> list[ModelT]:
    """Rows `start` to `stop` of `queryset`, or of its rows `after` a cursor's, in its order.

    The page is picked over the ids alone (an index-only walk past the rows before it, or a
    sort of ids and sort keys), then only its rows are read whole, with what the queryset
    annotates (a job object, whether a queue is paused): picked over whole rows, a page read
    every row before it whole, and a sort without an index sorted every matching row whole.
    """
    if stop > MAX_OFFSET:
        return []
    picked = queryset if after is None else queryset.filter(after)
    return list(queryset.filter(pk__in=picked.values("pk")[start:stop]))


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
    lists page through a million jobs without counting them all on every page.

    Above EXACT_COUNT_LIMIT the count is an estimate (`count_exact` is False), which may be
    far from the truth (a table not analysed since it grew), so it bounds no page: a page
    exists when it has rows, and is read with one row more to tell whether another follows.
    What a page read shows corrects the estimate: at least its rows, and the exact count on
    the last page. A page past the last row is an EmptyPage for `page`, and for `get_page`
    the last page, as in Django's paginator: finding it counts the matching rows, once,
    which costs what skipping to the empty page did (its OFFSET read them all).
    """

    def __init__(
        self,
        object_list: Any,
        per_page: int,
        *args: Any,
        known_count: int | None = None,
        **kwargs: Any,
    ) -> None:
        """`known_count`: the exact count when the caller has it at no cost (a counter)."""
        super().__init__(object_list, per_page, *args, **kwargs)
        if known_count is not None:
            self._correct_count(known_count, exact=True)

    @property
    def queryset(self) -> QuerySet[Any]:
        return cast("QuerySet[Any]", self.object_list)

    @cached_property
    def _counted(self) -> tuple[int, bool]:
        return bounded_count(self.queryset)

    @property
    def count(self) -> int:
        return self._counted[0]

    @property
    def count_exact(self) -> bool:
        return self._counted[1]

    def _correct_count(self, count: int, *, exact: bool) -> None:
        self.__dict__["_counted"] = (count, exact)
        self.__dict__.pop("num_pages", None)  # cached by Paginator from the count

    def validate_number(self, number: Any) -> int:
        try:
            return super().validate_number(number)
        except EmptyPage:
            if self.count_exact or int(number) < 1:
                raise
            return int(number)

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        start = (number - 1) * self.per_page
        if self.count_exact:
            # Django's bounds: the last page also takes up to `orphans` rows.
            end = start + self.per_page
            if end + self.orphans >= self.count:
                end = self.count
            return Page(page_rows(self.queryset, start, end), number, self)
        end = start + self.per_page + 1
        rows = page_rows(self.queryset, start, end)
        if not rows and number > 1:
            raise EmptyPage(self.error_messages["no_results"])
        if len(rows) > self.per_page:
            self._correct_count(max(self.count, end), exact=False)
        else:
            self._correct_count(start + len(rows), exact=True)
        return Page(rows[: self.per_page], number, self)

    def get_page(self, number: Any) -> Page:
        try:
            return super().get_page(number)
        except EmptyPage:
            self._correct_count(self.queryset.count(), exact=True)
            return super().get_page(number)


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
