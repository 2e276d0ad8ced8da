"""Request ids and the one access-log line per request; the audit log's actor; the page
policy (CSP) on documents only."""

import logging
import re
import time
import uuid
from collections.abc import Callable
from contextvars import Token
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from csp.middleware import CSPMiddleware
from django.core.validators import ProhibitNullCharactersValidator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.http.response import HttpResponseBase

from jobs import audit
from jobs.limits import printable
from jobs.logging import request_id_var
from jobs.models import AuditSource

from .clients import client_address
from .errors import is_api_request, validation_error_body

logger = logging.getLogger("jobs.access")

# The X-Request-ID a client may bring and have kept as its request's id (and what the
# OpenAPI document states of the header).
CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class _SyncAndAsyncMiddleware:
    """Sync and async capable, so that under ASGI an async view (the SSE stream) stays on the
    event loop and its body is streamed, not run through a thread."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)  # type: ignore[type-var]  # subclasses are callable


def new_request_id() -> str:
    """An id of the server's making, for a request that brings no sane one; also for the
    answers the servers send before any middleware sees the request (an over-long request
    line or header: `scheduler_project.server`, `scheduler_project.daphne_limits`)."""
    return uuid.uuid4().hex


class RequestIdMiddleware(_SyncAndAsyncMiddleware):
    """Tag the request, its log lines and its response with `X-Request-ID`.

    A client's own id is kept when it is a sane token; otherwise a new one is made.
    """

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        token, started = self._begin(request)
        try:
            return self._finish(request, self.get_response(request), started)
        finally:
            request_id_var.reset(token)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        token, started = self._begin(request)
        try:
            return self._finish(request, await self.get_response(request), started)
        finally:
            request_id_var.reset(token)

    def _begin(self, request: HttpRequest) -> tuple[Token[str | None], float]:
        offered = request.headers.get("X-Request-ID", "")
        request_id = offered if CLIENT_REQUEST_ID.match(offered) else new_request_id()
        request.request_id = request_id  # type: ignore[attr-defined]
        return request_id_var.set(request_id), time.perf_counter()

    def _finish(self, request: HttpRequest, response: HttpResponse, started: float) -> HttpResponse:
        response["X-Request-ID"] = request.request_id  # type: ignore[attr-defined]
        logger.info(
            "request",
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            },
        )
        return response


class NulParameterMiddleware(_SyncAndAsyncMiddleware):
    """Refuse (400) a query string whose names or values hold NUL. PostgreSQL's text cannot
    hold it, so no filter, search or id could match it, and a statement comparing with it
    fails: a 500 from every view and admin filter that does not check each parameter itself
    (the console's DLQ search and audit filters, Django's own admin filters did not)."""

    def __call__(self, request: HttpRequest) -> Any:
        refused = self._refusal(request)
        if iscoroutinefunction(self):
            return self._arefuse(refused) if refused else self.get_response(request)
        return refused or self.get_response(request)

    async def _arefuse(self, refused: HttpResponse) -> HttpResponse:
        return refused

    @staticmethod
    def _refusal(request: HttpRequest) -> HttpResponse | None:
        query = request.META.get("QUERY_STRING", "")
        if "%00" not in query and "\x00" not in query:  # the common case, without decoding
            return None
        details = {
            printable(name): [_NUL_MESSAGE]
            for name, values in request.GET.lists()
            if "\x00" in name or any("\x00" in value for value in values)
        }
        if not details:
            return None
        if is_api_request(request):
            return JsonResponse(validation_error_body(details), status=400)
        named = ", ".join(details)
        return HttpResponseBadRequest(f"{_NUL_MESSAGE.removesuffix('.')} in: {named}.")


# Django's words, as every form and serializer field says them of its own value.
_NUL_MESSAGE = str(ProhibitNullCharactersValidator.message)


class AuditActorMiddleware(_SyncAndAsyncMiddleware):
    """Name who acts in this request for the audit log (`jobs.audit`): the signed-in user
    (read when an action is recorded, after the API has authenticated its token), from
    where, from which address."""

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            # Only the event stream is async, and it changes nothing.
            return self.get_response(request)
        with audit.acting(actor_of(request)):
            return self.get_response(request)


def actor_of(request: HttpRequest) -> audit.Actor:
    path = request.path_info
    source = AuditSource.CONSOLE
    if path.startswith("/admin/"):
        source = AuditSource.ADMIN
    elif path.startswith(("/api/", "/metrics")):
        source = AuditSource.API
    return audit.Actor(source, client_address(request), lambda: getattr(request, "user", None))


class DocumentPolicyMiddleware(CSPMiddleware):
    """django-csp's Content Security Policy on every answer a browser may render: not on
    JSON. A policy governs what a document loads and runs; a JSON answer is never one
    (Django's `X-Content-Type-Options: nosniff` keeps a browser from reading it as HTML),
    and building the policy was 0.14 ms of each API request. The browsable API's pages are
    HTML and keep it."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        return super().process_response(request, response)
