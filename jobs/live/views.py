"""`GET /api/jobs/stream`: the live events of api.md as Server-Sent Events. `HEAD` answers the
same headers after the same checks, and no events.

Wire format (UTF-8, `text/event-stream`):

    retry: 3000                       once, first: how long EventSource waits to reconnect

    event: stats.updated              once, right after, always
    data: {"pending": 3, ...}

    event: job.completed              every event of the Redis channel, in channel order
    data: {"id": "...", ...}

    : keep-alive                      every SSE_KEEPALIVE_SECONDS, whatever else is sent

    event: stream.status              Redis lost ({"redis": "down"}) or back ({"redis": "up"},
    data: {"redis": "down"}           then a fresh stats.updated); also right after the first
                                      stats.updated when a client connects while Redis is down
    event: stream.dropped             the client fell too far behind; the server closes the
    data: {"reason": "client_too_slow"}  stream, and a reconnect starts fresh

The stream ends, with nothing more sent, at the first keep-alive after the token that opened
it is revoked, its user deactivated, or its session ended (`jobs.live.credentials`).

The live routes take no query parameter: one sent is refused, as every API read refuses one
it does not declare.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed

from jobs.api.auth import BearerTokenAuthentication
from jobs.api.errors import error_body, method_not_allowed, validation_error_body
from jobs.api.throttling import TooManyFailedTokens
from jobs.events import STATS_UPDATED
from jobs.filters import repeated_parameters, unknown_parameters
from jobs.stats import current_stats

from .credentials import Credential, SessionCredential, TokenCredential
from .db import read_and_release
from .hub import STREAM_STATUS, EventHub, frame, get_hub

RETRY_MILLISECONDS = 3000
# How long a new client waits for the hub's subscription before its first stats.updated.
SUBSCRIBE_WAIT_SECONDS = 2.0


class EventStreamResponse(StreamingHttpResponse):
    """The stream's answer, as far as Django sees it: its headers. The project's handler
    (`jobs.live.handler`) sends them, then the events itself: `first_frames`, then what the
    hub queues for the stream's client, for as long as `credential` holds. Without one (a
    HEAD request) the answer ends with its headers."""

    def __init__(self, credential: Credential | None) -> None:
        super().__init__(content_type="text/event-stream")
        self.credential = credential


def _authenticate(request: HttpRequest) -> Credential | JsonResponse:
    """The bearer token or console session that names the user, else the answer refusing
    the request."""
    try:
        found = BearerTokenAuthentication().authenticate(request)  # type: ignore[arg-type]
    except AuthenticationFailed as exc:
        return _unauthenticated(str(exc.detail))
    except TooManyFailedTokens as exc:
        response = _error(429, "rate_limited", exc.message)
        response["Retry-After"] = str(exc.seconds)
        return response
    if found is not None:
        return TokenCredential(found[1].pk)
    session_key = request.session.session_key
    if request.user.is_authenticated and session_key is not None:
        return SessionCredential(session_key, request.user.pk, request.user.get_session_auth_hash())
    return _unauthenticated("Authentication credentials were not provided.")


def _unauthenticated(message: str) -> JsonResponse:
    response = _error(401, "not_authenticated", message)
    response["WWW-Authenticate"] = "Bearer"
    return response


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status)


def _not_read(request: HttpRequest) -> JsonResponse | None:
    """The live routes serve GET, and HEAD as everywhere GET is (RFC 9110), which change
    nothing: another method gets this 405 (the views are CSRF-exempt), rather than the CSRF
    middleware's HTML page."""
    if request.method in ("GET", "HEAD"):
        return None
    return method_not_allowed(str(request.method), "GET, HEAD")


def _refused_query(request: HttpRequest) -> JsonResponse | None:
    """A 400 naming each query parameter, as `ApiView` names those a read does not declare
    (a repeated one as repeated, first): these routes declare none. A stream does not filter
    (every client gets every event), and one asked for `?type=send_email` answered as if
    unfiltered told its client that it did."""
    errors = repeated_parameters(request.GET) or unknown_parameters(request.GET, ())
    return JsonResponse(validation_error_body(errors), status=400) if errors else None


@csrf_exempt
async def job_stream(request: HttpRequest) -> HttpResponseBase:
    if refusal := _not_read(request):
        return refusal
    found = await read_and_release(_authenticate, request)
    if isinstance(found, JsonResponse):
        return found
    if refusal := _refused_query(request):
        return refusal
    # HEAD: no events behind the headers, or its answer would never end.
    response = EventStreamResponse(found if request.method == "GET" else None)
    response["Cache-Control"] = "no-cache"
    # Tell nginx-style proxies not to buffer the stream.
    response["X-Accel-Buffering"] = "no"
    return response


async def first_frames(hub: EventHub) -> bytes:
    """`retry`, then the counters (and Redis' state if it is down), once the hub has
    subscribed: the counters are then no older than the events that follow them."""
    await hub.wait_settled(SUBSCRIBE_WAIT_SECONDS)
    stats = await read_and_release(current_stats)
    first = f"retry: {RETRY_MILLISECONDS}\n\n".encode() + frame(STATS_UPDATED, stats)
    if hub.redis_up is False:
        first += frame(STREAM_STATUS, {"redis": "down"})
    return first


@csrf_exempt
async def stream_status(request: HttpRequest) -> HttpResponse:
    """This process's hub: connected clients, its reader, Redis as last seen."""
    if refusal := _not_read(request):
        return refusal
    if isinstance(found := await read_and_release(_authenticate, request), JsonResponse):
        return found
    return _refused_query(request) or JsonResponse(get_hub().counts())
