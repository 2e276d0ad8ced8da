"""Probes for process managers and load balancers, outside the versioned API.

- `GET /healthz`, liveness: the process answers requests. It reads nothing, so a database or
  Redis outage never gets a healthy process restarted (restarting would not fix them).
- `GET /readyz`, readiness: this process can serve, i.e. it reaches PostgreSQL and the
  schema has every migration of this code (200, else 503 in the error envelope with
  `Retry-After`). Redis is reported but never makes it unready: without Redis only live
  events and rate-limit counters are lost, never a request. Its database check
  (`database_check`), which `GET /api/v1/health` shares, waits
  `PROBE_CONNECTION_WAIT_SECONDS` at most for a connection, not the pool's timeout;
  `GET /metrics` waits as long before it reads anything (`require_database`).

Both are open, unthrottled, exempt from the HTTPS redirect (settings.SECURE_REDIRECT_EXEMPT),
and answer GET and HEAD only. `GET /api/v1/health` (api.md) stays as it is: 503 when either
service is down, or the schema lacks migrations.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from jobs.schema_version import SchemaBehind, require_current_schema

from .errors import RETRY_AFTER_SECONDS, error_body, method_not_allowed

# How long a probe waits for a connection from the process's pool. Django's own borrowing
# waits the pool's timeout (DATABASE_POOL_TIMEOUT, 10 s by default), right for a request with
# work to do once PostgreSQL is back; a probe's caller has a deadline of its own (Kubernetes'
# timeoutSeconds is 1 s by default) and simply asks again. Waiting that long, each probe of an
# outage held one of the process's request threads (as many as the pool's connections,
# `jobs.live.handler`) and answered after its caller had given up. A healthy pool lends an
# idle connection at once, or opens one in milliseconds.
PROBE_CONNECTION_WAIT_SECONDS = 1.0


def require_database() -> None:
    """`SELECT 1`, waiting `PROBE_CONNECTION_WAIT_SECONDS` at most for a connection; raises
    Django's OperationalError when the database cannot be reached."""
    # Django's PostgreSQL backend has `pool` (undeclared by django-stubs); None without one.
    pool = getattr(connection, "pool", None)
    if pool is None:  # a process without a pool: the test suite's own
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return
    # Django's names for psycopg's errors (PoolTimeout is an OperationalError).
    with connection.wrap_database_errors:
        pool.open()  # as Django does before borrowing: the first request opens it
        with pool.connection(timeout=PROBE_CONNECTION_WAIT_SECONDS) as borrowed:
            borrowed.execute("SELECT 1")


def database_check() -> tuple[str, str]:
    """The database as the probes report it, and the problem a 503 names ("" when none):
    ("ok", ""), ("unreachable: <error type>", "Unreachable"), or what its schema lacks of
    this code's migrations (`jobs.schema_version`) and "Not migrated"."""
    try:
        require_database()
    except DatabaseError as exc:
        return f"unreachable: {type(exc).__name__}", "Unreachable"
    try:
        require_current_schema()
    except SchemaBehind as behind:
        return str(behind), "Not migrated"
    return "ok", ""


def unavailable_message(problems: dict[str, str]) -> str:
    """The message of a probe's 503, from what is wrong with each service that failed:
    "Not migrated: database. Unreachable: redis."."""
    named: dict[str, list[str]] = {}
    for service, problem in problems.items():
        named.setdefault(problem, []).append(service)
    return " ".join(f"{problem}: {', '.join(services)}." for problem, services in named.items())


def redis_status() -> str:
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=1.0, socket_timeout=1.0
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"unreachable: {type(exc).__name__}"
    finally:
        client.close()
    return "ok"


def _reads_only(view: Callable[[HttpRequest], JsonResponse]) -> Callable[..., JsonResponse]:
    """GET and HEAD; another method gets the 405 envelope. CSRF-exempt: a probe changes
    nothing, and the CSRF middleware would answer a write with its HTML page first."""

    @csrf_exempt
    @wraps(view)
    def reading(request: HttpRequest) -> JsonResponse:
        if request.method not in ("GET", "HEAD"):
            return method_not_allowed(str(request.method), "GET, HEAD")
        return view(request)

    return reading


@_reads_only
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@_reads_only
def readyz(request: HttpRequest) -> JsonResponse:
    database, problem = database_check()
    checks = {"database": database, "redis": redis_status()}
    if not problem:
        return JsonResponse({"status": "ready", **checks})
    message = unavailable_message({"database": problem})
    body = error_body("unavailable", message, {"database": [database]})
    response = JsonResponse({"status": "unready", **checks, **body}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
