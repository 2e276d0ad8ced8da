"""Schemathesis over every operation of /api-docs.json with every check: no 500, every answer
as documented (status, headers, content type, body), every request the schema calls valid
accepted, every invalid one refused, and credentials required where the schema says so.

Seeded and bounded (`derandomize`, a fixed number of examples per operation), through the WSGI
app in this process against the test database.

Two rules of POST /jobs (and of each job of POST /jobs/batch) depend on the moment and on the
data, so no JSON Schema can state them (the schema says them in words): `scheduled_at` must be
in the future and `depends_on` must name an existing job. Nor can one state an `http_request`
URL's host, which only IDNA can judge (`jobs.outbound.sendable_url`). A request the schema
calls valid is made to keep them as a client would (a date moved into the future, the id of a
job that exists, a host a request can reach); invalid requests are sent as they were
generated. NUL is refused in payloads (`jobs.limits`) but not expressible per handler schema
either: it is left out of generated strings and tested on its own.

The schema's `TimeZone` is an enum of every IANA zone (about 600), and the coverage phase
sends each value of an enum once per branch that holds it: 4,183 of the 4,279 requests it made
for POST /jobs were a cron schedule in one more zone, one code path 600 times over (30 s of the
module's 70). The fuzz reads the schema with that enum cut to a few zones (UTC, a half-hour
offset, one with daylight saving); every other rule is as served. That the schema offers
every zone, and that a schedule takes each, is tested in test_schedules.py.

POST /jobs and each job of POST /jobs/batch are a branch per registered type, and the
coverage phase builds its cases for every branch while the module is collected, in each
test process. The test suite registers about twenty handlers of its own, most of them with a
free-form payload: one branch each, the same code path over again, which tripled the
collection (11 s of every process's 17). The fuzz keeps the project's own types and the
suite's three whose payloads are typed (a dataclass, a TypedDict, a pydantic model).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, settings

from jobs import limits, outbound, state
from jobs.api.auth import issue_token
from jobs.registry import registry
from tests.handlers_app import handlers  # noqa: F401 - registers the typed payloads fuzzed

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 30
# A leap year, so that any generated month and day exists in it; far enough ahead.
FUTURE_YEAR = 2096

ZONES_FUZZED = ["UTC", "Asia/Kolkata", "Europe/Paris"]
TYPES_FUZZED = {
    *("noop", "flaky", "send_email", "generate_report", "http_request"),
    *("typed_dataclass", "typed_dict", "typed_model"),
}


def _of_the_types_fuzzed(branches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # A branch is titled by its type, and "<type> (schedule)" for a recurring job's.
    return [b for b in branches if b["title"].removesuffix(" (schedule)") in TYPES_FUZZED]


def served_schema_with_fewer_zones() -> Any:
    # The document is served without credentials or the database.
    document = Client().get("/api-docs.json").json()
    schemas = document["components"]["schemas"]
    schemas["TimeZone"]["enum"] = ZONES_FUZZED
    for name in ("JobCreateRequest", "JobBatchItemRequest"):
        schemas[name]["oneOf"] = _of_the_types_fuzzed(schemas[name]["oneOf"])
    loaded = schemathesis.openapi.from_dict(document)
    loaded.app = get_wsgi_application()
    loaded.config.generation.update(allow_x00=False)
    return loaded


schema = served_schema_with_fewer_zones()
# The job types the schema was read with. A test module collected before this one may have
# registered more (importing a module of Django tasks declares them) and its tests may
# unregister them later in this process: each request must still find every type the
# schema names.
TYPES_OF_THE_SCHEMA = {name: registry.get(name) for name in registry.names()}


@pytest.fixture(autouse=True)
def _connection_kept_across_requests() -> Iterator[None]:
    # As Django's test client does: the test's transaction holds the connection, so the
    # handler must not close it at the end of each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def _types_of_the_schema_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_handlers", {**TYPES_OF_THE_SCHEMA, **registry._handlers})


@pytest.fixture
def token(operator: Any) -> str:
    return issue_token(operator)


@pytest.fixture
def upstream_id(db: None) -> str:
    return state.enqueue("noop", {}, priority=2)["id"]


def _in_the_future(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        now = int(datetime.now(UTC).timestamp() * 1000)
        ahead = int(timedelta(days=365).total_seconds() * 1000)
        return min(limits.MAX_MILLISECONDS, now + ahead + int(value) % ahead)
    if isinstance(value, str):
        return f"{FUTURE_YEAR}{value[4:]}"
    return value


def _to_a_sendable_host(url: str) -> str:
    try:
        outbound.sendable_url(url)
    except outbound.UnsendableURL:
        return "https://example.com/"
    return url


def keep_the_rules_no_schema_states(case: Any, upstream_id: str) -> None:
    """A valid request made to keep the rules no JSON Schema states, as a client would: a
    future `scheduled_at`, an existing `depends_on`, a cursor the server gave and no page
    number beside it, an `http_request` URL to a host a request can reach."""
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if positive and isinstance(case.query, dict) and "cursor" in case.query:
        case.query["cursor"] = "first"
        case.query.pop("page", None)
    # A limit's name keeps its scope's rule: a queue's is narrower than a type's.
    parameters = case.path_parameters
    if positive and isinstance(parameters, dict) and parameters.get("scope") == "queue":
        kept = re.sub(r"[^A-Za-z0-9_.:-]", "", str(parameters["name"]))
        parameters["name"] = kept if kept.strip(".") else "q"  # never dots alone
    body = case.body
    if not (positive and case.operation.method.upper() == "POST" and isinstance(body, dict)):
        return
    # POST /jobs/batch: each of its jobs as POST /jobs takes one.
    jobs = body["jobs"] if isinstance(body.get("jobs"), list) else [body]
    for job in jobs:
        if isinstance(job, dict) and job.get("scheduled_at") is not None:
            job["scheduled_at"] = _in_the_future(job["scheduled_at"])
        if isinstance(job, dict) and job.get("depends_on") is not None:
            job["depends_on"] = upstream_id
        if isinstance(job, dict) and job.get("type") == "http_request":
            job["payload"]["url"] = _to_a_sendable_host(job["payload"]["url"])


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_keeps_to_its_schema(case: Any, token: str, upstream_id: str) -> None:
    keep_the_rules_no_schema_states(case, upstream_id)
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})
