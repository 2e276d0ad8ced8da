"""Queues through the API: every job has one, the caller or the job type names it, and the
list filters on it."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from django.utils import timezone

from jobs import state
from jobs.registry import registry

from .conftest import claim_one
from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"


@pytest.fixture
def mail_type() -> Iterator[str]:
    registry.register("queued_mail", queue="emails")(lambda job: None)
    yield "queued_mail"
    registry.unregister("queued_mail")


def create(client, **body):
    return client.post(JOBS, {"payload": {}, "priority": 2, **body}, format="json")


def test_a_job_waits_in_the_default_queue_unless_told_otherwise(operator_client, mail_type):
    assert create(operator_client, type="noop").json()["queue"] == "default"
    assert create(operator_client, type="noop", queue=None).json()["queue"] == "default"
    assert create(operator_client, type="noop", queue="reports").json()["queue"] == "reports"
    # A type names its default queue at registration; the caller still wins.
    assert create(operator_client, type=mail_type).json()["queue"] == "emails"
    assert create(operator_client, type=mail_type, queue="bulk").json()["queue"] == "bulk"


@pytest.mark.parametrize("name", ["", "a/b", "a,b", "x" * 101])
def test_a_queue_name_that_could_not_be_served_is_refused(operator_client, name):
    error = assert_error(create(operator_client, type="noop", queue=name), 400, "validation_error")
    assert list(error["details"]) == ["queue"]


def test_the_list_filters_on_the_queue(viewer_client):
    state.enqueue("noop", {}, queue="emails")
    state.enqueue("noop", {})
    listed = viewer_client.get(JOBS, {"queue": "emails"}).json()
    assert [job["queue"] for job in listed["results"]] == ["emails"]
    assert viewer_client.get(JOBS, {"queue": "nowhere"}).json()["count"] == 0


def test_the_next_run_of_a_recurring_job_keeps_its_queue(worker):
    job = state.enqueue("noop", {}, recur_interval="every_1_minute", queue="cron")
    claimed = claim_one(worker, job["id"])
    report = state.complete([state.Success(claimed.id, claimed.attempt_id, None, timezone.now())])
    assert [created["queue"] for created in report.created] == ["cron"]


QUEUES = "/api/v1/queues"


def test_the_queues_list_counts_unfinished_jobs_and_says_which_are_paused(viewer_client):
    state.enqueue("noop", {}, queue="emails")
    state.enqueue("noop", {}, queue="emails")
    listed = viewer_client.get(QUEUES).json()
    assert [queue["name"] for queue in listed] == ["default", "emails"]
    emails = listed[1]
    assert (emails["pending"], emails["processing"], emails["paused"]) == (2, 0, False)
    assert emails["changed_at"] is None
    assert viewer_client.get(f"{QUEUES}/emails").json() == emails


def test_an_operator_pauses_and_resumes_a_queue(operator_client, viewer_client):
    job = state.enqueue("noop", {}, queue="emails")
    paused = operator_client.post(f"{QUEUES}/emails/pause").json()
    assert (paused["name"], paused["paused"], paused["pending"]) == ("emails", True, 1)
    assert paused["changed_at"].endswith("Z")
    # Idempotent, and its jobs are still pending (shown as paused by the console).
    assert operator_client.post(f"{QUEUES}/emails/pause").json()["paused"] is True
    assert viewer_client.get(f"{JOBS}/{job['id']}").json()["status"] == "pending"
    assert operator_client.post(f"{QUEUES}/emails/resume").json()["paused"] is False
    # A queue no job names yet may be paused before its jobs arrive.
    assert operator_client.post(f"{QUEUES}/later/pause").json()["pending"] == 0


def test_queue_routes_refuse_what_they_cannot_do(viewer_client, operator_client):
    assert_error(viewer_client.post(f"{QUEUES}/emails/pause"), 403, "permission_denied")
    assert_error(viewer_client.get(f"{QUEUES}/nowhere"), 404, "not_found")
    # A name no queue can have names none (NUL was a database error, a 500).
    for impossible in ("a,b", "a%00b", "x" * 101):
        assert_error(viewer_client.get(f"{QUEUES}/{impossible}"), 404, "not_found")
    assert viewer_client.get(f"{QUEUES}/default").json()["pending"] == 0
    error = assert_error(operator_client.post(f"{QUEUES}/a,b/pause"), 400, "validation_error")
    assert list(error["details"]) == ["name"]


LIMITS = "/api/v1/limits"


def test_an_operator_sets_reads_and_removes_a_limit(operator_client, viewer_client):
    body = {"max_running": 5, "max_starts": 100, "period_seconds": 60}
    limit = operator_client.put(f"{LIMITS}/queue/emails", body, format="json").json()
    assert {k: limit[k] for k in ("scope", "name", *body)} == {
        "scope": "queue",
        "name": "emails",
        **body,
    }
    assert (limit["running"], limit["recent_starts"]) == (0, 0)
    # Setting again replaces it.
    replaced = operator_client.put(f"{LIMITS}/queue/emails", {"max_running": 2}, format="json")
    assert (replaced.json()["max_running"], replaced.json()["max_starts"]) == (2, None)
    assert viewer_client.get(LIMITS).json() == [replaced.json()]
    assert viewer_client.get(f"{LIMITS}/queue/emails").json() == replaced.json()
    assert operator_client.delete(f"{LIMITS}/queue/emails").status_code == 204
    assert viewer_client.get(LIMITS).json() == []
    assert_error(viewer_client.get(f"{LIMITS}/queue/emails"), 404, "not_found")
    for impossible in ("queue/a%00b", "type/a%00b", "a%00b/emails", "worker/emails"):
        assert_error(viewer_client.get(f"{LIMITS}/{impossible}"), 404, "not_found")
    # Removing what does not exist changes nothing; what no limit can be is refused.
    assert operator_client.delete(f"{LIMITS}/queue/emails").status_code == 204
    for path, field in (("worker/emails", "scope"), ("queue/a,b", "name")):
        error = assert_error(operator_client.delete(f"{LIMITS}/{path}"), 400, "validation_error")
        assert set(error["details"]) == {field}


def test_a_limit_takes_any_name_a_job_type_can_have(operator_client, viewer_client):
    # A job type's name is any 1 to 100 characters without a control character (a space,
    # a slash, a letter outside ASCII): each can be limited, read and removed by its name.
    name = "reports/daily summary é"
    path = f"{LIMITS}/type/{quote(name, safe='')}"
    limit = operator_client.put(path, {"max_running": 2}, format="json").json()
    assert (limit["scope"], limit["name"], limit["max_running"]) == ("type", name, 2)
    assert viewer_client.get(path).json() == limit
    assert operator_client.delete(path).status_code == 204
    assert viewer_client.get(LIMITS).json() == []
    # A queue's name keeps its own rule, and a control character is refused, not unrouted.
    for refused_path in ("queue/a%20b", "type/a%0Ab"):
        refused = operator_client.put(f"{LIMITS}/{refused_path}", {"max_running": 2}, format="json")
        assert set(assert_error(refused, 400, "validation_error")["details"]) == {"name"}


@pytest.mark.parametrize(
    ("path", "body", "fields"),
    [
        ("type/noop", {}, {"max_running"}),
        ("type/noop", {"max_starts": 5}, {"period_seconds"}),
        ("type/noop", {"max_running": 0}, {"max_running"}),
        ("type/noop", {"max_running": 1, "burst": 2}, {"burst"}),
        ("worker/noop", {"max_running": 1}, {"scope"}),
        ("queue/a,b", {"max_running": 1}, {"name"}),
    ],
)
def test_a_limit_that_says_nothing_sensible_is_refused(operator_client, path, body, fields):
    error = assert_error(
        operator_client.put(f"{LIMITS}/{path}", body, format="json"), 400, "validation_error"
    )
    assert set(error["details"]) == fields


def test_the_schema_says_every_body_is_required(client, operator_client):
    paths = client.get("/api-docs.json").json()["paths"]
    bodies = {
        (method, path): operation["requestBody"].get("required")
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "requestBody" in operation
    }
    assert bodies[("put", "/api/v1/limits/{scope}/{name}")] is True
    assert set(bodies.values()) == {True}
    # What a client meets when it sends none anyway.
    error = assert_error(operator_client.put(f"{LIMITS}/type/noop"), 400, "validation_error")
    assert error["details"] == {"max_running": ["Give max_running, max_starts, or both."]}
