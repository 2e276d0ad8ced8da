"""The filters and ordering of `GET /jobs` (and of the console's job ledger).

Every time bound takes Unix milliseconds or an ISO 8601 string. Ranges are half-open:
`<name>_after` includes its instant and `<name>_before` excludes it, so consecutive windows
(`created_after=T1&created_before=T2`, then `created_after=T2...`) neither overlap nor gap.
A value that does not parse is a form error under the parameter's own name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from datetime import UTC, datetime, time, timedelta
from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.utils.dateparse import parse_date, parse_datetime

from .limits import EPOCH, MAX_MILLISECONDS, OUT_OF_RANGE_MESSAGE, written_year_in_range
from .models import Job, JobStatus, RecurInterval

DLQ = "dlq"
STATUS_CHOICES = [*JobStatus.choices, (DLQ, "Dead-letter queue")]
PRIORITY_CHOICES = [(1, "1 (high)"), (2, "2"), (3, "3 (low)")]
# Each sort key's whole order, ascending: the key, then what breaks its ties, so that pages
# are stable. Ties go oldest first, as equal deadlines run (the claim takes the earliest
# virtual deadline, then the oldest job: `jobs.scheduling`), and `-key` is the exact
# reverse, so that one index in this order reads a page of either direction without
# sorting the matching rows (over a month of history a sort of all of them took 0.4 s a
# page). The times and the priority have theirs (`Job.Meta.indexes`); `created_at` breaks
# its own ties by the id, newest first, so that the default list (`-created_at`) reads
# `jobs_created_idx` as it is. The other keys have none: ARCHITECTURE.md, "HTTP API", says
# what one over every job would cost.
SORT_ORDERS: dict[str, tuple[str, ...]] = {
    "priority": ("priority", "created_at", "id"),
    "attempt_count": ("attempt_count", "created_at", "id"),
    "max_retries": ("max_retries", "created_at", "id"),
    "created_at": ("created_at", "-id"),
    "scheduled_at": ("scheduled_at", "created_at", "id"),
    "virtual_deadline": ("virtual_deadline", "created_at", "id"),
}
ORDERING_FIELDS = tuple(SORT_ORDERS)
DEFAULT_ORDERING = "-created_at"
# Query-string name prefix -> model field, for the `<name>_before` / `<name>_after` pairs.
TIME_FIELDS = {
    "created": "created_at",
    "scheduled": "scheduled_at",
    "started": "started_at",
    "completed": "completed_at",
    "cancelled": "cancelled_at",
    "next_retry": "next_retry_at",
    "updated": "updated_at",
}

# Whole milliseconds; `16.0` is the same integer (JSON Schema and many clients say so).
_MILLISECONDS = re.compile(r"^(-?\d{1,20})(\.0*)?$")
TIME_FORMAT_MESSAGE = (
    "Enter Unix milliseconds (e.g. 1781136000000) or an ISO 8601 date-time "
    "(e.g. 2026-06-11T00:00:00Z)."
)

# The error of a query parameter nothing takes: the API's, the ledger's, a bulk action's.
UNKNOWN_QUERY_PARAMETER = "Unknown query parameter."
# The error of one given more than once: the API's, the live routes', the ledger's.
GIVEN_MORE_THAN_ONCE = "Given more than once: send one value."


def unknown_parameters(names: Iterable[str], taken: Collection[str]) -> dict[str, list[str]]:
    """The errors of the parameters in `names` that are not in `taken`: one answered as if it
    were absent tells a client that believed it filtered, or a bulk action's operator, that
    it did."""
    return {name: [UNKNOWN_QUERY_PARAMETER] for name in names if name not in taken}


def repeated_parameters(params: QueryDict) -> dict[str, list[str]]:
    """The errors of the parameters of `params` given more than once. Each takes one value,
    and Django hands a view the last of several: `status=pending&status=failed`, meant as
    "either", listed only the failed jobs."""
    return {name: [GIVEN_MORE_THAN_ONCE] for name, values in params.lists() if len(values) > 1}


class InstantError(ValueError):
    """Not an instant, or one out of the range of `jobs.limits`; the message says which."""


def parse_instant(value: Any) -> datetime:
    """Unix milliseconds (int or digits) or ISO 8601 -> aware datetime.

    An ISO time keeps the offset it was written with, so that `jobs.state` reads its year as
    written, as here (`9998-12-31T23:59-23:59` is 9999 in UTC). A naive ISO time is taken as
    UTC and a bare date as its midnight UTC. A `+` offset that
    arrived unencoded in a query string (and so became a space) is still understood.
    Raises InstantError for anything else, and for a time outside `jobs.limits`' years.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _from_milliseconds(value)
    if not isinstance(value, str):
        raise InstantError(TIME_FORMAT_MESSAGE)
    text = value.strip()
    if milliseconds := _MILLISECONDS.match(text):
        return _from_milliseconds(int(milliseconds.group(1)))
    for candidate in (text, text.replace(" ", "+")):
        try:
            parsed = parse_datetime(candidate)
        except ValueError:
            parsed = None
        if parsed is not None:
            if not written_year_in_range(parsed):
                raise InstantError(OUT_OF_RANGE_MESSAGE)
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    try:
        day = parse_date(text)
    except ValueError:
        day = None
    if day is None:
        raise InstantError(TIME_FORMAT_MESSAGE)
    if not written_year_in_range(datetime.combine(day, time.min)):
        raise InstantError(OUT_OF_RANGE_MESSAGE)
    return datetime.combine(day, time.min, tzinfo=UTC)


def _from_milliseconds(milliseconds: int) -> datetime:
    if not 0 <= milliseconds <= MAX_MILLISECONDS:
        raise InstantError(f"{OUT_OF_RANGE_MESSAGE} In Unix milliseconds: 0 to {MAX_MILLISECONDS}.")
    return EPOCH + timedelta(milliseconds=milliseconds)


class InstantField(forms.Field):
    def to_python(self, value: Any) -> datetime | None:
        if value in self.empty_values:
            return None
        try:
            return parse_instant(value)
        except InstantError as error:
            raise forms.ValidationError(str(error), code="invalid") from None


class InstantFilter(django_filters.Filter):
    field_class = InstantField


def _before(field_name: str) -> InstantFilter:
    return InstantFilter(
        field_name=field_name,
        lookup_expr="lt",
        label=f"{field_name} strictly before this instant (Unix ms or ISO 8601)",
    )


def _after(field_name: str) -> InstantFilter:
    return InstantFilter(
        field_name=field_name,
        lookup_expr="gte",
        label=f"{field_name} at or after this instant (Unix ms or ISO 8601)",
    )


def _one_of(values: list[str], note: str = "") -> dict[str, str]:
    listed = ", ".join(values) + (f" {note}" if note else "")
    return {"invalid_choice": f"%(value)s is not valid: use one of {listed}."}


class JobFilter(django_filters.FilterSet):
    """Every filter and the ordering of `GET /jobs`, over `Job`."""

    status = django_filters.ChoiceFilter(
        choices=STATUS_CHOICES,
        method="filter_status",
        label="Status; `failed` is waiting for a retry, `dlq` the dead-letter queue",
        error_messages=_one_of([value for value, _ in STATUS_CHOICES]),
    )
    priority = django_filters.ChoiceFilter(
        choices=PRIORITY_CHOICES,
        label="Priority (1..3)",
        error_messages={"invalid_choice": "%(value)s is not a priority: use 1, 2 or 3."},
    )
    type = django_filters.CharFilter(field_name="type", label="Job type (exact)")
    queue = django_filters.CharFilter(field_name="queue", label="Queue (exact)")
    recur_interval = django_filters.ChoiceFilter(
        choices=RecurInterval.choices,
        label="Recurrence interval",
        error_messages=_one_of(RecurInterval.values),
    )
    created_before = _before("created_at")
    created_after = _after("created_at")
    scheduled_before = _before("scheduled_at")
    scheduled_after = _after("scheduled_at")
    started_before = _before("started_at")
    started_after = _after("started_at")
    completed_before = _before("completed_at")
    completed_after = _after("completed_at")
    cancelled_before = _before("cancelled_at")
    cancelled_after = _after("cancelled_at")
    next_retry_before = _before("next_retry_at")
    next_retry_after = _after("next_retry_at")
    updated_before = _before("updated_at")
    updated_after = _after("updated_at")
    ordering = django_filters.OrderingFilter(
        fields=ORDERING_FIELDS,
        label=(
            "Sort key, `-` prefix for descending (the exact reverse: equal keys oldest first"
            " ascending, newest first descending); default -created_at. created_at,"
            " scheduled_at and priority read a page from an index; attempt_count,"
            " max_retries and virtual_deadline sort every job the filters match (over a"
            " million jobs, 0.3-0.5 s a page: narrow the list with a filter)"
        ),
        error_messages=_one_of(list(ORDERING_FIELDS), "(`-` prefix for descending)"),
    )

    class Meta:
        model = Job
        fields: list[str] = []

    @classmethod
    def unknown(cls, params: Iterable[str], also: Collection[str] = ()) -> dict[str, list[str]]:
        """The errors of the parameters in `params` that are neither a filter nor in `also`:
        django-filter ignores them, and a typo must not silently widen a list, nor the jobs
        a bulk action takes."""
        return unknown_parameters(params, {*cls.base_filters, *also})

    def filter_status(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        return queryset.filter(status_condition(value))

    def filter_queryset(self, queryset: QuerySet[Job]) -> QuerySet[Job]:
        queryset = super().filter_queryset(queryset)
        return queryset.order_by(
            *list_order(self.form.cleaned_data.get("ordering") or [DEFAULT_ORDERING])
        )


def status_condition(value: str) -> Q:
    """The jobs a `status` filter value (a job status, or `dlq`) means."""
    # Both columns named, so that a status's jobs are one range of `jobs_status_created_idx`
    # in the list's order, however few they are and however old. Only a failed job is ever
    # in the DLQ (`jobs_dlq_is_failed`): `in_dlq=False` leaves the other statuses' jobs as
    # they are.
    if value == DLQ:
        return Q(status=JobStatus.FAILED, in_dlq=True)
    return Q(status=value, in_dlq=False)


def list_order(keys: list[str]) -> list[str]:
    """The whole order of a list sorted by `keys` (`-` = descending): the keys, then the
    tie-breakers of the last one (`SORT_ORDERS`) in its direction."""
    last = keys[-1]
    descending = last.startswith("-")
    order = list(keys)
    for field in SORT_ORDERS[last.lstrip("-")][1:]:
        name = field.lstrip("-")
        if not any(key.lstrip("-") == name for key in order):
            order.append(name if field.startswith("-") == descending else f"-{name}")
    return order
