"""`page` (1-based) and `limit` pagination: `{"count", "next", "previous", "results"}`.

Page 1 always answers, empty when nothing matches; a page past the last one is a 404
`not_found` (DRF's convention), which tells a client walking `next` links apart from one
that guessed a page number from a stale count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.conf import settings
from django.core.paginator import EmptyPage, Paginator
from django.db.models import Model, QuerySet
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.utils.urls import remove_query_param, replace_query_param

PAGE_PARAM = "page"
LIMIT_PARAM = "limit"

M = TypeVar("M", bound=Model)


def _positive_int(
    params: Mapping[str, Any], name: str, default: int, errors: dict[str, list[str]]
) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        errors[name] = ["Must be a positive integer."]
    return value


def page_window(params: Mapping[str, Any]) -> tuple[int, int]:
    """(page, limit) from the query string; a 400 naming the parameter when out of bounds."""
    errors: dict[str, list[str]] = {}
    page = _positive_int(params, PAGE_PARAM, 1, errors)
    limit = _positive_int(params, LIMIT_PARAM, settings.API_PAGE_SIZE, errors)
    if LIMIT_PARAM not in errors and limit > settings.API_MAX_PAGE_SIZE:
        errors[LIMIT_PARAM] = [f"Must be at most {settings.API_MAX_PAGE_SIZE}."]
    if errors:
        raise ValidationError(errors)
    return page, limit


def paginate(
    queryset: QuerySet[M], request: Request, represent: Callable[[M], dict[str, Any]]
) -> dict[str, Any]:
    page_number, limit = page_window(request.query_params)
    paginator = Paginator(queryset, limit)
    try:
        page = paginator.page(page_number)
    except EmptyPage:
        raise NotFound(
            f"Page {page_number} is past the end: {paginator.count} jobs make "
            f"{paginator.num_pages} page(s) of {limit}."
        ) from None
    url = request.build_absolute_uri()
    previous = None
    if page.has_previous():
        previous_number = page.previous_page_number()
        previous = (
            remove_query_param(url, PAGE_PARAM)
            if previous_number == 1
            else replace_query_param(url, PAGE_PARAM, previous_number)
        )
    return {
        "count": paginator.count,
        "next": replace_query_param(url, PAGE_PARAM, page.next_page_number())
        if page.has_next()
        else None,
        "previous": previous,
        "results": [represent(item) for item in page.object_list],
    }
