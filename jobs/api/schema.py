"""OpenAPI pieces shared by the views: the bearer scheme, error responses, list parameters."""

from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from jobs.filters import InstantFilter, JobFilter

from .errors import error_body
from .serializers import INSTANT_SCHEMA, ErrorSerializer


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "jobs.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "`python manage.py create_api_token <username> --role operator`",
        }


_ERRORS: dict[int, tuple[str, str, str, dict[str, Any]]] = {
    400: (
        "validation_error",
        "A body field or query parameter is wrong (`validation_error`, `details` maps each "
        "one to its messages), or the body is not JSON (`malformed_json`).",
        "Invalid input: priority.",
        {"priority": ["Must be 1, 2 or 3."]},
    ),
    401: ("not_authenticated", "No or bad credentials.", "Invalid or revoked token.", {}),
    403: (
        "permission_denied",
        "Authenticated, but a viewer may only read.",
        "Your role may only read.",
        {},
    ),
    404: ("not_found", "No such job, page or route.", "No job with id ….", {}),
    409: (
        "invalid_state",
        "The action does not apply to the job's current state; `details.status` names it "
        "(`dlq` for a job in the dead-letter queue).",
        "Cannot retry job …: it is completed.",
        {"status": "completed"},
    ),
    413: (
        "payload_too_large",
        "The body is over API_MAX_BODY_BYTES (1 MiB by default).",
        "The request body is over the limit of 1048576 bytes.",
        {},
    ),
    415: (
        "unsupported_media_type",
        "The body is not `application/json`.",
        'Unsupported media type "text/plain" in request.',
        {},
    ),
    429: (
        "rate_limited",
        "Over API_RATE_LIMIT (off by default); `Retry-After` says when to come back.",
        "Too many requests. Retry after the Retry-After seconds.",
        {},
    ),
    500: (
        "internal_error",
        "A bug; never a trace in the body. The log has it under the X-Request-ID.",
        "Internal error. The server log has the details under this request id.",
        {},
    ),
}

READ_ERRORS = (401, 429, 500)
WRITE_ERRORS = (401, 403, 413, 429, 500)


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    responses = {}
    for status in statuses:
        code, description, message, details = _ERRORS[status]
        responses[status] = OpenApiResponse(
            response=ErrorSerializer,
            description=description,
            examples=[OpenApiExample(code, value=error_body(code, message, details))],
        )
    return responses


def _filter_schema(spec: django_filters.Filter) -> Any:
    if isinstance(spec, django_filters.OrderingFilter):
        fields = [param for _, param in spec.param_map.items()]
        return {"type": "string", "enum": [*fields, *(f"-{field}" for field in fields)]}
    if isinstance(spec, django_filters.ChoiceFilter):
        values = [value for value, _ in spec.extra["choices"]]
        kind = "integer" if all(isinstance(v, int) for v in values) else "string"
        return {"type": kind, "enum": values}
    if isinstance(spec, InstantFilter):
        return INSTANT_SCHEMA
    return OpenApiTypes.STR


def list_parameters() -> list[OpenApiParameter]:
    parameters = [
        OpenApiParameter(
            name,
            _filter_schema(spec),
            OpenApiParameter.QUERY,
            description=str(spec.label),
        )
        for name, spec in JobFilter.base_filters.items()
    ]
    parameters += [
        OpenApiParameter(
            "page",
            OpenApiTypes.INT,
            OpenApiParameter.QUERY,
            description="1-based. Past the last page: 404 not_found (page 1 is always 200).",
        ),
        OpenApiParameter(
            "limit",
            OpenApiTypes.INT,
            OpenApiParameter.QUERY,
            description=f"Jobs per page: default {settings.API_PAGE_SIZE}, at most "
            f"{settings.API_MAX_PAGE_SIZE} (more is a 400).",
        ),
    ]
    return parameters


JOB_ID_PARAMETER = OpenApiParameter(
    "job_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="A job id; anything that is not a UUID is a 400.",
)
