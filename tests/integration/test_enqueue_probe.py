"""Enqueue beyond the single job, as a client of a mature queue probes it: idempotency keys
under racing requests and refused requests, batches, and fan-in through a dead letter's
retry, a cancel and a cron schedule's pause or deletion."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import Job, Worker
from tests.api.conftest import claim_one
from tests.api.test_job_routes import assert_error
from tests.attempts import fail_attempt
from tests.conftest import token_client

JOBS = "/api/v1/jobs"
BATCH = f"{JOBS}/batch"
BODY = {"type": "noop", "payload": {"n": 1}, "priority": 2}


@pytest.fixture
def worker(db: None) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname="probe", pid=os.getpid(), started_at=now, heartbeat_at=now
    )


def race(count: int, request: Callable[[int], Any]) -> list[Any]:
    """`request(i)` from `count` threads released at once, each on its own connection."""
    start = threading.Barrier(count)
    answers: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            start.wait()
            answers[index] = request(index)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def finish(worker: Worker, job_id: str) -> None:
    claimed = claim_one(worker, job_id)
    state.complete([state.Success(claimed.id, claimed.attempt_id, None, timezone.now())], worker.id)


def status_of(job_id: str) -> tuple[str, str | None]:
    job = Job.objects.get(id=job_id)
    return job.status, job.last_error


@pytest.mark.django_db
def test_a_key_is_not_spent_by_a_request_refused_after_it_was_taken(operator_client):
    # The unknown upstream job is found only once the key is taken, in its transaction.
    missing = str(uuid.uuid4())
    refused = operator_client.post(
        JOBS, {**BODY, "depends_on": missing}, format="json", HTTP_IDEMPOTENCY_KEY="k"
    )
    assert assert_error(refused, 400, "validation_error")["details"] == {
        "depends_on": [f"No job with id {missing}."]
    }
    created = operator_client.post(JOBS, BODY, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert created.status_code == 201
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_requests_under_one_key_create_one_job_and_refuse_the_other_body(operator):
    clients = [token_client(operator) for _ in range(6)]
    bodies = [{**BODY, "payload": {"n": index % 2}} for index in range(6)]
    answers = race(
        6,
        lambda i: clients[i].post(JOBS, bodies[i], format="json", HTTP_IDEMPOTENCY_KEY="race"),
    )
    (job,) = Job.objects.all()
    for body, answer in zip(bodies, answers, strict=True):
        if body["payload"] == job.payload:
            assert answer.status_code in (200, 201) and answer.json()["id"] == str(job.id)
        else:
            assert answer.status_code == 409
            assert answer.json()["error"]["details"]["job_id"] == str(job.id)
    assert [a.status_code for a in answers].count(201) == 1


@pytest.mark.django_db(transaction=True)
def test_racing_repeats_of_a_batch_create_it_once(operator):
    clients = [token_client(operator) for _ in range(4)]
    batch = {"jobs": [BODY] * 50}
    answers = race(
        4, lambda i: clients[i].post(BATCH, batch, format="json", HTTP_IDEMPOTENCY_KEY="b")
    )
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 201]
    assert len({tuple(job["id"] for job in a.json()["jobs"]) for a in answers}) == 1
    assert Job.objects.count() == 50


@pytest.mark.django_db
def test_a_batch_with_one_bad_job_writes_nothing_and_names_it(operator_client):
    jobs = [BODY] * 999 + [{**BODY, "priority": 4}]
    error = assert_error(
        operator_client.post(BATCH, {"jobs": jobs}, format="json"), 400, "validation_error"
    )
    assert error["details"] == {"jobs.999.priority": ["Must be 1, 2 or 3."]}
    too_many = operator_client.post(BATCH, {"jobs": [BODY] * 1001}, format="json")
    assert list(assert_error(too_many, 400, "validation_error")["details"]) == ["jobs"]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_job_id_is_a_string_not_a_number(operator_client):
    # DRF's UUIDField reads an integer as the UUID of that number: `5` was looked up, and
    # refused as "No job with id 00000000-0000-0000-0000-000000000005."
    for given in (5, True, [5]):
        response = operator_client.post(JOBS, {**BODY, "depends_on": given}, format="json")
        details = assert_error(response, 400, "validation_error")["details"]
        assert details == {"depends_on": ["Must be a valid UUID."]}, given
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_fifty_upstream_jobs_one_through_the_dlq_then_the_dependent_runs(operator, worker):
    client = token_client(operator)
    upstream = client.post(BATCH, {"jobs": [BODY] * 50}, format="json").json()["jobs"]
    joined = client.post(
        JOBS, {**BODY, "depends_on": [job["id"] for job in upstream]}, format="json"
    ).json()
    for job in upstream[:-1]:
        finish(worker, job["id"])
    last = upstream[-1]["id"]
    Job.objects.filter(id=last).update(max_retries=1)
    claimed = claim_one(worker, last)
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="RuntimeError",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(0),
    )
    assert client.get(f"{JOBS}/{joined['id']}/explain").json()["reason"] == "waiting_for_upstream"
    assert client.post(f"{JOBS}/{last}/retry").status_code == 200
    assert not state.claim(worker.id, 1, [uuid.UUID(joined["id"])])
    finish(worker, last)
    finish(worker, joined["id"])
    assert status_of(joined["id"]) == ("completed", None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("action", [state.pause_schedule, state.delete_schedule])
def test_a_schedule_paused_or_deleted_cancels_the_jobs_waiting_on_its_run(action, events):
    # The run was cancelled, and a job waiting on it waited for ever, pending.
    run = state.enqueue("noop", {}, cron="0 0 1 1 *")
    waiting = state.enqueue("noop", {}, depends_on=uuid.UUID(run["id"]))
    below = state.enqueue("noop", {}, depends_on=[uuid.UUID(waiting["id"])])
    action(uuid.UUID(run["schedule_id"]))
    assert status_of(run["id"])[0] == "cancelled"
    assert status_of(waiting["id"]) == ("cancelled", f"Upstream job {run['id']} was cancelled")
    assert status_of(below["id"]) == ("cancelled", f"Upstream job {waiting['id']} was cancelled")
    for job in (waiting, below):
        event = events.wait_for("job.cancelled", lambda data, job=job: data["id"] == job["id"])
        assert event["data"]["status"] == "cancelled"
