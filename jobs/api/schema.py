"""OpenAPI pieces shared by the views: the bearer scheme, error responses, list parameters."""

from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from django.urls import get_script_prefix, reverse
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from jobs import limits, queue_names
from jobs.events import JOB_EVENT_TYPES, STATS_UPDATED
from jobs.filters import (
    GIVEN_MORE_THAN_ONCE,
    UNKNOWN_QUERY_PARAMETER,
    InstantFilter,
    JobFilter,
)
from jobs.live.hub import STREAM_DROPPED, STREAM_STATUS
from jobs.live.views import RETRY_MILLISECONDS
from jobs.models import RecurInterval
from jobs.recurrence import zone_names
from jobs.registry import registry
from jobs.state import IDEMPOTENCY_KEY, MAX_UPSTREAM

from .errors import UNAVAILABLE_MESSAGE, error_body, validation_error_body
from .middleware import CLIENT_REQUEST_ID
from .serializers import INSTANT_SCHEMA, MAX_BATCH, ErrorSerializer, RefusesUnknownFields


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "jobs.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "`python manage.py create_api_token <username> --role operator`",
        }


class ClosedBody(OpenApiSerializerExtension):
    """A body that refuses unknown fields says so (`additionalProperties: false`): a client
    generated from the schema, or a fuzzer, then sends none."""

    target_class = RefusesUnknownFields
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema


_ERRORS: dict[int, tuple[str, str, str, dict[str, Any]]] = {
    400: (
        "validation_error",
        "A body field or query parameter is wrong, or a query parameter is given more than "
        "once: each takes one value (`validation_error`, `details` maps each one to its "
        "messages); or the body is not JSON (`malformed_json`).",
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
        "Over API_RATE_LIMIT (off by default), or too many failed token attempts from the "
        "address (API_TOKEN_FAILURE_LIMIT); `Retry-After` says when to come back.",
        "Too many requests. Retry after the Retry-After seconds.",
        {},
    ),
    500: (
        "internal_error",
        "A bug; never a trace in the body. The log has it under the X-Request-ID.",
        "Internal error. The server log has the details under this request id.",
        {},
    ),
    503: (
        "unavailable",
        "The database cannot be reached (down, restarting, cut off); `Retry-After` says when "
        "to try again. Nothing was changed.",
        UNAVAILABLE_MESSAGE,
        {},
    ),
}

READ_ERRORS = (401, 429, 500, 503)
WRITE_ERRORS = (401, 403, 413, 429, 500, 503)


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
    # A text filter: anything but NUL (Django's forms refuse it), and never empty.
    return {"type": "string", "minLength": 1, "pattern": "^[^\\x00]+$"}


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
            {"type": "integer", "minimum": 1},
            OpenApiParameter.QUERY,
            description="1-based. Past the last page: 404 not_found (page 1 is always 200).",
        ),
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": settings.API_MAX_PAGE_SIZE},
            OpenApiParameter.QUERY,
            description=f"Jobs per page: default {settings.API_PAGE_SIZE}, at most "
            f"{settings.API_MAX_PAGE_SIZE} (more is a 400).",
        ),
        OpenApiParameter(
            "cursor",
            {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
            OpenApiParameter.QUERY,
            description="Keyset pagination, flat cost at any depth: `first`, then the cursor "
            "of each `next` link (anything else is a 400). Rows inserted or removed during a "
            "walk never make it skip or repeat a row; `previous` is null; `page` beside it "
            "is a 400.",
        ),
    ]
    return parameters


_DECLARED: dict[tuple[type[APIView], str], frozenset[str]] = {}


def declared_query_parameters(view: APIView, method: str) -> frozenset[str]:
    """The query parameters that the OpenAPI operation of `view`'s `method` declares (its
    `extend_schema(parameters=...)`), and DRF's renderer choice (the browsable API's links
    carry it): what the route takes, read from the one declaration the document is made
    of, so that the two never disagree. Declarations are fixed at import: read once a route
    and method (drf-spectacular's scope check needs a view with its request)."""
    key = (type(view), method)
    if key not in _DECLARED:
        taken = {api_settings.URL_FORMAT_OVERRIDE}
        schema_class = getattr(getattr(view, method.lower()), "kwargs", {}).get("schema")
        if schema_class is not None:
            schema = schema_class()
            schema.view = view
            schema.method = method
            taken.update(
                parameter.name
                for parameter in schema.get_override_parameters()
                if isinstance(parameter, OpenApiParameter)
                and parameter.location == OpenApiParameter.QUERY
            )
        _DECLARED[key] = frozenset(taken)
    return _DECLARED[key]


IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": f"^{IDEMPOTENCY_KEY.pattern}$",
    },
    OpenApiParameter.HEADER,
    description="Printable ASCII, no space at either end. A repeat of the same request "
    f"under this key within {settings.SCHEDULER_IDEMPOTENCY_WINDOW:g} s answers 200 with the "
    "job (of a batch: the jobs) the first one created (also when both race), with "
    "`Idempotent-Replayed: true`; the key with a different body is a 409 "
    "`idempotency_key_reused`. The same request is the same body, however its instants are "
    "written, its upstream jobs (`depends_on`) in any order, and a `scheduled_at` that has "
    "passed since is no 400 on its repeat.",
)

IDEMPOTENCY_CONFLICT = OpenApiResponse(
    response=ErrorSerializer,
    description="The `Idempotency-Key` was used by a different request; `details` names it "
    "and the job that request created (of a batch, its first).",
    examples=[
        OpenApiExample(
            "idempotency_key_reused",
            value=error_body(
                "idempotency_key_reused",
                "Idempotency-Key 'order-42' was already used by a different request, which "
                "created job …. Send the same request to get that job, or a new key for a "
                "new job.",
                {"idempotency_key": "order-42", "job_id": "…"},
            ),
        )
    ],
)

# What a replayed answer says, as Stripe's do: a client tells its retry's answer from a new
# job's without comparing ids (a 200 is only ever a replay, but a header survives a proxy
# or a client library that folds 200 and 201 together).
REPLAYED_HEADER = "Idempotent-Replayed"

IDEMPOTENT_REPLAYED = OpenApiParameter(
    REPLAYED_HEADER,
    {"type": "string", "enum": ["true"]},
    OpenApiParameter.HEADER,
    description="On a replay only: this answer is the first request's under the same "
    "`Idempotency-Key` (its job, as it is now), and nothing was created.",
    required=True,
    response=[200],
)

JOB_LOCATION = OpenApiParameter(
    "Location",
    {"type": "string", "format": "uri"},
    OpenApiParameter.HEADER,
    description="The job's URL (`GET /api/v1/jobs/{job_id}`).",
    required=True,
    response=[201, 200],
)

JOB_ID_PARAMETER = OpenApiParameter(
    "job_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="A job id; anything that is not a UUID is a 400.",
)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


# The fields every job type shares, with the rules `jobs.state.enqueue` applies to them.
_COMMON_FIELDS: dict[str, dict[str, Any]] = {
    "priority": {"type": "integer", "enum": [1, 2, 3], "description": "1 = high, 3 = low."},
    "scheduled_at": {
        **_nullable(INSTANT_SCHEMA),
        "description": "Must be in the future; absent or null means due now.",
    },
    "recur_interval": {"enum": [*RecurInterval.values, None], "description": "Absent: once."},
    "depends_on": {
        "anyOf": [
            {"type": "string", "format": "uuid"},
            {
                "type": "array",
                "items": {"type": "string", "format": "uuid"},
                "minItems": 1,
                "maxItems": MAX_UPSTREAM,
            },
            {"type": "null"},
        ],
        "description": "An existing job that is not cancelled, or a list of them (fan-in); "
        "this one waits until every one of them is completed. One already completed counts at "
        "once; one in the dead-letter queue holds this job until it is retried and completes.",
    },
    "cron": {"type": "null", "description": "Set it to make a schedule (the other branch)."},
    "timezone": {"type": "null", "description": "Only with `cron`."},
    "queue": {
        **_nullable({"type": "string", "pattern": queue_names.QUEUE_NAME_PATTERN}),
        "description": "The queue the job waits in; absent or null means the one its type "
        f"names, else `{queue_names.DEFAULT_QUEUE}`.",
    },
    "max_retries": {
        **_nullable({"type": "integer", "minimum": 1, "maximum": limits.MAX_ATTEMPTS}),
        "description": f"Attempts before the dead-letter queue; null or absent: "
        f"{settings.SCHEDULER_DEFAULT_MAX_RETRIES}.",
    },
}
# A cron expression the schema can vouch for: numbers, `*` and `*/n` in each field's range,
# days of the month up to 28 so that every month has them. The server takes all of cron's
# syntax (lists, ranges, steps, names, L, #); the schema describes that in words.
_CRON_PATTERN = (
    r"^(\*|\*/[1-9]|[1-5]?[0-9]) (\*|\*/[1-9]|1?[0-9]|2[0-3]) (\*|[1-9]|1[0-9]|2[0-8]) "
    r"(\*|[1-9]|1[0-2]) (\*|[0-6])$"
)
_SCHEDULE_FIELDS: dict[str, dict[str, Any]] = {
    "cron": {
        "type": "string",
        "pattern": _CRON_PATTERN,
        "description": "A 5-field cron expression (minute hour day-of-month month "
        "day-of-week, e.g. `30 2 * * *`; lists, ranges, steps and names work too): creates "
        "a schedule and answers its first run, due at its first slot after now.",
    },
    "timezone": {
        "anyOf": [{"$ref": "#/components/schemas/TimeZone"}, {"type": "null"}],
        "description": "The IANA time zone the slots are read in; default UTC. A slot in an "
        "hour skipped by a spring-forward change runs at the first minute after it; one in "
        "a repeated hour runs once.",
    },
    **{
        name: {"type": "null", "description": "Not with `cron`."}
        for name in ("scheduled_at", "recur_interval", "depends_on")
    },
}
_PAYLOAD_LIMITS = (
    f"It may nest at most {limits.MAX_JSON_DEPTH} arrays and objects, and no key or string "
    "may hold NUL (\\u0000) or a lone UTF-16 surrogate."
)


def _job_branches(
    fields: dict[str, dict[str, Any]], *, scheduled: bool = False
) -> list[dict[str, Any]]:
    """One body schema per registered job type, each with that type's own payload schema (a
    cron schedule's when `scheduled`)."""
    return [
        {
            "type": "object",
            "title": f"{name} (schedule)" if scheduled else name,
            "properties": {
                "type": {"const": name, "description": "The job type."},
                "payload": {
                    **registry.get(name).schema,
                    "description": f"The payload of a {name} job. {_PAYLOAD_LIMITS}",
                },
                **fields,
            },
            "required": ["type", "payload", "priority", *(["cron"] if scheduled else [])],
            "additionalProperties": False,
        }
        for name in registry.submittable()
    ]


def job_create_body(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """POSTPROCESSING_HOOK: the bodies of POST /jobs (a job, or a cron schedule) and of each
    job of POST /jobs/batch as the rules really are, per registered job type."""
    schemas = result["components"]["schemas"]
    schemas["TimeZone"] = {
        "type": "string",
        "enum": sorted(zone_names()),
        "description": "An IANA time zone name.",
    }
    schemas["JobCreateRequest"] = {
        "oneOf": _job_branches(_COMMON_FIELDS)
        + _job_branches({**_COMMON_FIELDS, **_SCHEDULE_FIELDS}, scheduled=True),
        "description": "A new job. Unknown fields are refused.",
    }
    batch_fields = {
        k: v for k, v in _COMMON_FIELDS.items() if k not in ("depends_on", "cron", "timezone")
    }
    schemas["JobBatchItemRequest"] = {
        "oneOf": _job_branches(batch_fields),
        "description": "A new job of a batch: as for POST /jobs, but without `depends_on`, "
        "`cron` or `timezone` (refused, naming POST /jobs, where a dependent job or a "
        "schedule is created).",
    }
    # drf-spectacular states neither `allow_empty=False` nor `max_length` of a list of
    # serializers.
    schemas["JobBatchCreateRequest"]["properties"]["jobs"].update(minItems=1, maxItems=MAX_BATCH)
    return result


def bodies_required(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """POSTPROCESSING_HOOK: every body this API takes is required, as its views refuse a
    request without one; drf-spectacular does not mark a body given as a raw schema (PUT
    /limits) so."""
    for operations in result["paths"].values():
        for operation in operations.values():
            if "requestBody" in operation:
                operation["requestBody"]["required"] = True
    return result


ERROR_SCHEMA_REF = "#/components/schemas/Error"
AUTHENTICATED: list[dict[str, list[str]]] = [{"bearerAuth": []}, {"cookieAuth": []}]


def _error_response(
    status: int, description: str | None = None, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`error_responses(status)` as the document states it, for a path drf-spectacular does
    not generate; `body` for an example of its own."""
    code, default_description, message, details = _ERRORS[status]
    example = {"summary": code, "value": body or error_body(code, message, details)}
    return {
        "description": description or default_description,
        "content": {
            "application/json": {"schema": {"$ref": ERROR_SCHEMA_REF}, "examples": {code: example}}
        },
    }


def _live_path(route: str) -> str:
    # The document's paths are the URLconf's, without the prefix a deployment may mount the
    # site under: reverse() would add it.
    return "/" + reverse(route).removeprefix(get_script_prefix())


def _live_refusals() -> dict[str, Any]:
    return {
        "400": _error_response(
            400,
            "A query parameter: these routes take none (`validation_error`; `details` maps "
            f"each one sent to `{UNKNOWN_QUERY_PARAMETER}`, or a repeated one to "
            f"`{GIVEN_MORE_THAN_ONCE}`).",
            validation_error_body({"type": [UNKNOWN_QUERY_PARAMETER]}),
        ),
        "401": _error_response(401, "No, bad or revoked credentials."),
        "429": _error_response(
            429,
            "Too many failed token attempts from this address (API_TOKEN_FAILURE_LIMIT), good "
            "token or not; `Retry-After` says when to come back. API_RATE_LIMIT does not "
            "apply.",
        ),
        "500": _error_response(500),
        "503": _error_response(503),
    }


_STREAM_DESCRIPTION = (
    "Server-Sent Events, UTF-8. First `retry: {retry}`, then one `{stats}` (the `/jobs/stats` "
    "object), then every event as it happens, `event:` its type and `data:` a JSON object: "
    '{jobs} (each the job object), `{stats}`; `{status}` (`{{"redis": "down"}}` or '
    '`"up"`, then a fresh `{stats}`) when Redis is lost or back; `{dropped}` just before the '
    "server closes a client that fell too far behind (reconnect for a fresh start). A "
    "`: keep-alive` comment comes at least every {keepalive:g} s (SSE_KEEPALIVE_SECONDS). "
    "Besides that drop, the server ends the stream only when it stops, or at the first "
    "keep-alive after the token or console session that opened it no longer holds. A viewer "
    "may read it. HEAD answers the same headers after the same checks, and no events. Any "
    "other method is a 405 `method_not_allowed` with `Allow: GET, HEAD`."
).format(
    retry=RETRY_MILLISECONDS,
    keepalive=settings.SSE_KEEPALIVE_SECONDS,
    stats=STATS_UPDATED,
    jobs=", ".join(f"`{name}`" for name in JOB_EVENT_TYPES),
    status=STREAM_STATUS,
    dropped=STREAM_DROPPED,
)


def _stream_operations(operation_id: str, summary: str) -> dict[str, Any]:
    """GET and HEAD of an event stream route."""
    get: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "description": _STREAM_DESCRIPTION,
        "tags": ["live"],
        "security": AUTHENTICATED,
        "responses": {
            "200": {
                "description": "The stream; `Cache-Control: no-cache`.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **_live_refusals(),
        },
    }
    head = {
        **get,
        "operationId": f"{operation_id}_head",
        "summary": f"{summary}: its headers only",
        "responses": {
            status: {"description": response["description"]}
            for status, response in get["responses"].items()
        },
    }
    return {"get": get, "head": head}


_HUB_COUNTS = {
    "type": "object",
    "properties": {
        "clients": {"type": "integer", "minimum": 0, "description": "Open streams."},
        "queued_frames": {
            "type": "integer",
            "minimum": 0,
            "description": "Frames waiting to be written to them.",
        },
        "reader_running": {"type": "boolean", "description": "Subscribed to the channel."},
        "stopping_reader": {
            "type": "boolean",
            "description": "The last client left and the reader is closing.",
        },
        "redis": {"enum": ["unknown", "up", "down"]},
        "asyncio_tasks": {"type": "integer", "minimum": 0},
    },
    "required": [
        "clients",
        "queued_frames",
        "reader_running",
        "stopping_reader",
        "redis",
        "asyncio_tasks",
    ],
    "additionalProperties": False,
}


def live_routes(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """POSTPROCESSING_HOOK: the live routes (`jobs.live`), plain async Django views that
    drf-spectacular does not see, since they are not DRF's: an open stream must not hold a
    thread."""
    paths = result["paths"]
    paths[_live_path("job-stream-v1")] = _stream_operations("jobs_stream", "Live job events")
    paths[_live_path("job-stream")] = _stream_operations(
        "jobs_stream_unversioned", "Live job events (the same stream, outside /v1)"
    )
    paths[_live_path("job-stream-status")] = {
        "get": {
            "operationId": "jobs_stream_status",
            "summary": "This process's event hub",
            "description": "What the process that answers holds: its connected stream "
            "clients, the frames queued for them, its Redis reader and Redis as last seen. "
            "A viewer may read it.",
            "tags": ["live"],
            "security": AUTHENTICATED,
            "responses": {
                "200": {
                    "description": "",
                    "content": {"application/json": {"schema": _HUB_COUNTS}},
                },
                **_live_refusals(),
            },
        }
    }
    return result


# The headers of the answers, each named once in `components.headers`.
_HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-ID": {
        "description": "On every answer: the client's own `X-Request-ID` when it sent a sane "
        "one (1 to 128 letters, digits, `.`, `_`, `:` or `-`), else one the server made. The "
        "server's log lines of the request carry it.",
        "required": True,
        "schema": {"type": "string", "pattern": CLIENT_REQUEST_ID.pattern},
    },
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    },
    "WWW-Authenticate": {
        "description": "The scheme to authenticate with: `Bearer`.",
        "required": True,
        "schema": {"type": "string", "const": "Bearer"},
    },
}
# Which answers carry which header, beyond `X-Request-ID` on all.
_HEADERS_BY_STATUS = {"401": ["WWW-Authenticate"], "429": ["Retry-After"], "503": ["Retry-After"]}


def response_headers(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """POSTPROCESSING_HOOK: the headers every answer of a status carries, whatever its route
    (the middleware and the error handler set them), named on each response."""
    result["components"]["headers"] = _HEADERS
    for operations in result["paths"].values():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                headers = response.setdefault("headers", {})
                for name in ["X-Request-ID", *_HEADERS_BY_STATUS.get(status, [])]:
                    headers[name] = {"$ref": f"#/components/headers/{name}"}
    return result
