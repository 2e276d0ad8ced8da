"""Django's answers for what no view handled (handler400, handler404, handler500). Under
`/api/` the API's envelope, whoever asks (api.md: one shape from every route). Elsewhere a
page: the console's to a signed-in user, Django's plain one to anyone else (the admin
answers its own addresses)."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views import defaults

from jobs.api.errors import (
    bad_request_view,
    is_api_request,
    not_found_view,
    server_error_view,
)
from jobs.console import access
from jobs.logging import request_id_var


def _console_user(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated) and not request.path.startswith("/admin/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return bad_request_view(request, exception)
    if isinstance(exception, RequestDataTooBig) and _console_user(request):
        return access.too_large(request)
    return defaults.bad_request(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return not_found_view(request, exception)
    if _console_user(request):
        return access.not_found(request)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        return server_error_view(request)
    # Reads nothing of the database, which may be what failed.
    return render(request, "console/500.html", {"request_id": request_id_var.get()}, status=500)
