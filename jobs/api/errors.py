"""The one error shape of the API: `{"error": {"code", "message", "details"}}`.

DRF exceptions, the domain errors of `jobs.state`, Django's 404 and oversized bodies all
become this envelope here. A database that cannot be reached, or whose schema lacks this
code's migrations, is a 503 `unavailable` with `Retry-After` (an outage, not a bug;
`jobs.api.unavailable` does the same for the console).
Anything else is a 500 `internal_error` whose body says nothing
about the cause; the traceback goes to the log, tagged with the request id. That holds with
DEBUG on too, so no client ever sees a stack trace or SQL.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.db import InterfaceError, OperationalError, ProgrammingError
from django.http import Http404, HttpRequest, JsonResponse
from psycopg.errors import UndefinedColumn, UndefinedTable
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from jobs.queues import UnknownLimit, UnknownQueue
from jobs.state import (
    IdempotencyKeyReused,
    InvalidStateError,
    JobNotFound,
    JobValidationError,
)

from .throttling import TooManyFailedTokens

logger = logging.getLogger("jobs.api")

NOT_FOUND_MESSAGE = "Not found."
INTERNAL_ERROR_MESSAGE = "Internal error. The server log has the details under this request id."
UNAVAILABLE_MESSAGE = "The database is unreachable. Retry after the Retry-After seconds."
NOT_MIGRATED_MESSAGE = (
    "The database is not migrated for this version of the scheduler: it waits for "
    "`manage.py migrate`. Retry after the Retry-After seconds."
)
# What a client should wait before trying again while the database is down: a restart of
# PostgreSQL takes seconds.
RETRY_AFTER_SECONDS = 5

# The `code` of every error the API answers with (also the enum of the OpenAPI schema).
ERROR_CODES = (
    "validation_error",
    "malformed_json",
    "not_authenticated",
    "permission_denied",
    "not_found",
    "method_not_allowed",
    "not_acceptable",
    "invalid_state",
    "idempotency_key_reused",
    "payload_too_large",
    "request_too_large",
    "unsupported_media_type",
    "rate_limited",
    "internal_error",
    "unavailable",
)


class MalformedJSON(exceptions.ParseError):
    default_detail = "The request body is not valid JSON."
    default_code = "malformed_json"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"The request body is over the limit of {limit} bytes.")


def is_api_request(request: HttpRequest) -> bool:
    """Whether `request` is for the API (`/api/...`), answered in the envelope whatever
    fails; every other address is a page's."""
    return request.path.startswith("/api/")


def database_outage(exc: BaseException) -> str | None:
    """What the 503 of `exc` says, or None when `exc` is no outage but a bug in a query. An
    outage is the database down or cut off (refusing connections, or a connection lost
    mid-request), or its schema behind this code: a table or column a statement names does
    not exist yet (a release's process up before its `migrate`, a server pointed at an
    empty database)."""
    if isinstance(exc, OperationalError | InterfaceError):
        return UNAVAILABLE_MESSAGE
    # Told by the error's class, not by reading `django_migrations` as /readyz does
    # (`jobs.schema_version`): a request pays nothing while the schema is current, and the
    # failed statement has spoiled the transaction it ran in.
    if isinstance(exc, ProgrammingError) and isinstance(
        exc.__cause__, UndefinedTable | UndefinedColumn
    ):
        return NOT_MIGRATED_MESSAGE
    return None


def log_outage(request: Any, exc: BaseException) -> None:
    method, path = getattr(request, "method", "?"), getattr(request, "path", "?")
    what = "not migrated" if database_outage(exc) == NOT_MIGRATED_MESSAGE else "unreachable"
    logger.warning("database %s in %s %s: %s", what, method, path, exc)


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def method_not_allowed(method: str, allowed: str) -> JsonResponse:
    """The 405 envelope of a plain Django view, in DRF's words, with `Allow`."""
    response = JsonResponse(
        error_body("method_not_allowed", f'Method "{method}" not allowed.'), status=405
    )
    response["Allow"] = allowed
    return response


def validation_error_body(details: dict[str, Any]) -> dict[str, Any]:
    """The envelope of a 400 `validation_error`: field -> messages, named in its message."""
    return error_body("validation_error", _validation_message(details), details)


def _validation_details(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return detail
    return {"non_field_errors": detail if isinstance(detail, list) else [detail]}


def _validation_message(details: dict[str, Any]) -> str:
    return f"Invalid input: {', '.join(map(str, details))}." if details else "Invalid input."


def _envelope_of(exc: Exception) -> tuple[int, str, str, Any] | None:
    """(status, code, message, details) for every exception the API knows how to answer."""
    if outage := database_outage(exc):
        return 503, "unavailable", outage, {}
    if isinstance(exc, JobValidationError):
        return 400, "validation_error", _validation_message(exc.details), exc.details
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return 400, "validation_error", f"Too many query or form fields: at most {limit}.", {}
    if isinstance(exc, JobNotFound | UnknownQueue | UnknownLimit):
        return 404, "not_found", str(exc), {}
    if isinstance(exc, InvalidStateError):
        return 409, "invalid_state", str(exc), {"status": exc.status}
    if isinstance(exc, IdempotencyKeyReused):
        details = {"idempotency_key": exc.key, "job_id": str(exc.job_id)}
        return 409, "idempotency_key_reused", str(exc), details
    if isinstance(exc, RequestDataTooBig):
        return 413, "payload_too_large", PayloadTooLarge.default_detail, {}
    if isinstance(exc, Http404):
        return 404, "not_found", NOT_FOUND_MESSAGE, {}
    if isinstance(exc, DjangoPermissionDenied):
        return 403, "permission_denied", str(exc) or "Permission denied.", {}
    if isinstance(exc, exceptions.ValidationError):
        details = _validation_details(exc.detail)
        return 400, "validation_error", _validation_message(details), details
    if isinstance(exc, exceptions.ParseError):
        return 400, "malformed_json", str(exc.detail), {}
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return 401, "not_authenticated", str(exc.detail), {}
    if isinstance(exc, TooManyFailedTokens):
        return 429, "rate_limited", exc.message, {}
    if isinstance(exc, exceptions.Throttled):
        return 429, "rate_limited", "Too many requests. Retry after the Retry-After seconds.", {}
    if isinstance(exc, exceptions.APIException):
        return exc.status_code, str(exc.default_code), str(exc.detail), {}
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception of a DRF view becomes the envelope."""
    envelope = _envelope_of(exc)
    request = context.get("request")
    if database_outage(exc):
        log_outage(request, exc)
    if envelope is None:
        logger.exception(
            "unhandled error in %s %s",
            getattr(request, "method", "?"),
            getattr(request, "path", "?"),
        )
        envelope = 500, "internal_error", INTERNAL_ERROR_MESSAGE, {}
    status_code, code, message, details = envelope
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = str(exc.auth_header)  # type: ignore[attr-defined]
    wait = getattr(exc, "wait", None) if isinstance(exc, exceptions.Throttled) else None
    if wait is not None:
        headers["Retry-After"] = str(max(1, math.ceil(wait)))
    if status_code == 503:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    set_rollback()
    return Response(error_body(code, message, details), status=status_code, headers=headers)


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """handler404, and the catch-all of unknown routes under /api/ (so even with DEBUG on)."""
    return JsonResponse(
        error_body("not_found", f"Not found: {request.method} {request.path}."), status=404
    )


def server_error_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(error_body("internal_error", INTERNAL_ERROR_MESSAGE), status=500)


def bad_request_view(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """A request Django refused before any view (a body over the limit, a host not allowed,
    too many fields)."""
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(
            error_body("payload_too_large", PayloadTooLarge.default_detail), status=413
        )
    return JsonResponse(
        error_body("validation_error", "The request could not be read."), status=400
    )
