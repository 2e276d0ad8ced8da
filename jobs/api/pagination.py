"""Pagination of job lists: `{"count", "count_exact", "next", "previous", "results"}`.

Two ways through a list, with the same response:

- `page` (1-based) and `limit`. Page 1 always answers, empty when nothing matches; a page
  past the last one is a 404 `not_found` (DRF's convention), which tells a client walking
  `next` links apart from one that guessed a page number from a stale count. A page is
  found by skipping the rows before it (an index walk over them), so its cost grows with
  its depth.
- `cursor`: `cursor=first`, then each `next` link. A page starts right after the last row
  of the one before, whatever the depth (keyset pagination over the list's ordering, which
  always ends with the id), and rows inserted or removed meanwhile never shift a walk: no
  row is seen twice or skipped. `previous` is always null (a cursor walks forward). A
  `page` beside a cursor is a 400: answered as if absent, it left a client that mixed the
  two ways on pages it did not ask for, its `next` link carrying both.

`count` is exact up to `jobs.selectors.EXACT_COUNT_LIMIT` matching jobs and PostgreSQL's
estimate above it (`count_exact` says which): an exact count reads every matching row.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import F, Field, Func, Q, QuerySet, Value
from django.db.models.lookups import GreaterThan, LessThan
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.utils.urls import remove_query_param, replace_query_param

from jobs.models import Job
from jobs.selectors import bounded_count, page_rows

PAGE_PARAM = "page"
LIMIT_PARAM = "limit"
CURSOR_PARAM = "cursor"
FIRST = "first"


def _positive_int(
    params: Mapping[str, Any], name: str, default: int, errors: dict[str, list[str]]
) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    # ASCII digits only: int() also reads " 2 ", "1_0" and "٣", which no link writes.
    value = int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() else 0
    if value < 1:
        errors[name] = ["Must be a positive integer."]
    return value


def page_window(params: Mapping[str, Any]) -> tuple[int, int]:
    """(page, limit) from the query string; a 400 naming the parameter when out of bounds,
    or `page` when a cursor is given too."""
    errors: dict[str, list[str]] = {}
    page = _positive_int(params, PAGE_PARAM, 1, errors)
    if PAGE_PARAM in params and CURSOR_PARAM in params:
        errors.setdefault(PAGE_PARAM, []).append(
            "Not with cursor: walk a list by page or by cursor, not both."
        )
    limit = _positive_int(params, LIMIT_PARAM, settings.API_PAGE_SIZE, errors)
    if LIMIT_PARAM not in errors and limit > settings.API_MAX_PAGE_SIZE:
        errors[LIMIT_PARAM] = [f"Must be at most {settings.API_MAX_PAGE_SIZE}."]
    if errors:
        raise ValidationError(errors)
    return page, limit


def paginate(
    queryset: QuerySet[Job], request: Request, represent: Callable[[Job], dict[str, Any]]
) -> dict[str, Any]:
    page_number, limit = page_window(request.query_params)
    cursor = request.query_params.get(CURSOR_PARAM)
    ordering = tuple(str(field) for field in queryset.query.order_by)
    after = None if cursor is None else after_cursor(cursor, ordering)
    count, exact = bounded_count(queryset)
    url = request.build_absolute_uri()
    if after is not None:
        rows = page_rows(queryset, 0, limit + 1, after)
        next_url = (
            replace_query_param(url, CURSOR_PARAM, encode_cursor(rows[limit - 1], ordering))
            if len(rows) > limit
            else None
        )
        previous = None
    else:
        offset = (page_number - 1) * limit
        rows = page_rows(queryset, offset, offset + limit + 1)
        if not rows and page_number > 1:
            pages = max(1, -(-count // limit))
            about = "" if exact else "about "
            raise NotFound(
                f"Page {page_number} is past the end: {about}{count} jobs make "
                f"{about}{pages} page(s) of {limit}."
            )
        next_url = (
            replace_query_param(url, PAGE_PARAM, page_number + 1) if len(rows) > limit else None
        )
        previous = None
        if page_number > 1:
            previous = (
                remove_query_param(url, PAGE_PARAM)
                if page_number == 2
                else replace_query_param(url, PAGE_PARAM, page_number - 1)
            )
    return {
        "count": count,
        "count_exact": exact,
        "next": next_url,
        "previous": previous,
        "results": [represent(row) for row in rows[:limit]],
    }


# --- cursors ------------------------------------------------------------------------------------


def encode_cursor(row: Job, ordering: tuple[str, ...]) -> str:
    """The cursor of the page after `row` in `ordering` (the list's order_by)."""
    values = [_field(row, key) for key in ordering]
    raw = json.dumps({"o": list(ordering), "v": values}, separators=(",", ":"), default=str)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _field(row: Job, key: str) -> Any:
    value = getattr(row, key.lstrip("-"))
    return value if isinstance(value, int) else str(value)


def after_cursor(cursor: str, ordering: tuple[str, ...]) -> Q:
    """The rows after the cursor's row in `ordering` (Q() for `first`)."""
    if cursor == FIRST:
        return Q()
    invalid = ValidationError(
        {CURSOR_PARAM: [f"Not a cursor: use {FIRST}, or the cursor of a next link."]}
    )
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        keys, values = decoded["o"], decoded["v"]
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise invalid from None
    if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
        raise invalid
    if tuple(keys) != ordering:
        raise ValidationError(
            {CURSOR_PARAM: ["This cursor belongs to another ordering: start again with first."]}
        )
    try:
        parsed = [
            _model_field(key).to_python(value) for key, value in zip(keys, values, strict=True)
        ]
    except (DjangoValidationError, TypeError, ValueError):
        raise invalid from None
    if None in parsed:
        raise invalid
    return _keyset(list(zip(keys, parsed, strict=True)))


def _model_field(key: str) -> Field[Any, Any]:
    return cast("Field[Any, Any]", Job._meta.get_field(key.lstrip("-")))


class _Row(Func):
    """A row, `(a, b, c)`: PostgreSQL compares two rows key by key, as it sorts them. Made
    of expressions, not SQL text, so that its columns take the alias the query gives the
    table: in the subquery that picks a page's ids (`jobs.selectors.page_rows`), `jobs.id`
    named the outer query's row."""

    template = "(%(expressions)s)"

    def __init__(self, *expressions: Any) -> None:
        # Its keys have types of their own, and comparing rows needs none of the whole.
        super().__init__(*expressions, output_field=Field())


def _keyset(keys: list[tuple[str, Any]]) -> Q:
    """Rows strictly after (v1, v2, ...) in the order of keys (`-` = descending). Every
    ordering field is NOT NULL, so plain comparisons order them as PostgreSQL does."""
    if len({key.startswith("-") for key, _ in keys}) == 1:
        # Keys all one way (a sort key's own order, `jobs.filters.SORT_ORDERS`): the rows
        # after are one range of the index in that order, which PostgreSQL reads from the
        # cursor on for a row comparison. For the OR below it reads from the start of the
        # first key's value: halfway down a list sorted by priority, 0.16 s over a month of
        # history.
        compare = LessThan if keys[0][0].startswith("-") else GreaterThan
        columns = _Row(*(F(key.lstrip("-")) for key, _ in keys))
        return Q(compare(columns, _Row(*(Value(value) for _, value in keys))))
    after = Q(pk__in=[])
    equal_before = Q()
    for key, value in keys:
        field = key.lstrip("-")
        after |= equal_before & Q(**{f"{field}__{'lt' if key.startswith('-') else 'gt'}": value})
        equal_before &= Q(**{field: value})
    # The same rows, with a range on the first key that an index in this order can start from
    # (an OR alone would make PostgreSQL read every row before the cursor too).
    first_key, first_value = keys[0]
    bound = "lte" if first_key.startswith("-") else "gte"
    return Q(**{f"{first_key.lstrip('-')}__{bound}": first_value}) & after
