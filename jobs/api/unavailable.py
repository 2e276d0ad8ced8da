"""The 503 of every view that is not the API's: the console, the admin, the login page.

DRF views answer a database outage (unreachable, or its schema behind this code) through
`jobs.api.errors.exception_handler`; this middleware gives every other view the same rule:
the error envelope under /api/, a page saying so everywhere else, each with `Retry-After`,
never a 500.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from .errors import (
    NOT_MIGRATED_MESSAGE,
    RETRY_AFTER_SECONDS,
    database_outage,
    error_body,
    is_api_request,
    log_outage,
)


class DatabaseUnavailableMiddleware:
    """Last in MIDDLEWARE, so that it sees the view's exception first."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not (outage := database_outage(exc)):
            return None
        log_outage(request, exc)
        response: HttpResponse
        if is_api_request(request):
            response = JsonResponse(error_body("unavailable", outage), status=503)
        else:
            context = {
                "retry_after": RETRY_AFTER_SECONDS,
                "not_migrated": outage == NOT_MIGRATED_MESSAGE,
            }
            response = render(request, "console/503.html", context, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
