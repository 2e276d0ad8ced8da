"""What `jobs.state` refuses from Python as `POST /jobs` refuses it: a payload over
`API_MAX_BODY_BYTES` as compact JSON, from every path that stores one (a JobValidationError
on `payload`, nothing written, the caller's transaction still usable); a blank time zone. And
what it takes: an int subclass such as an `IntegerChoices` member, stored as the plain int."""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import models, transaction
from django.utils import timezone

from jobs import state
from jobs.models import Job, Schedule, Worker
from tests.attempts import fail_attempt

pytestmark = pytest.mark.django_db

LIMIT = 1024
# The compact JSON of {"blob": ""}: what a payload holds around its string.
AROUND = len('{"blob":""}')


def over_the_limit(limit: int = LIMIT) -> dict[str, str]:
    return {"blob": "x" * (limit - AROUND + 1)}


def too_large(limit: int = LIMIT) -> list[str]:
    return [f"payload is {limit + 1:,} bytes as JSON, over API_MAX_BODY_BYTES ({limit:,})."]


@pytest.fixture
def body_limit(settings):
    settings.API_MAX_BODY_BYTES = LIMIT
    return LIMIT


def test_a_payload_over_the_default_limit_is_refused_naming_it():
    limit = 1024 * 1024
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", over_the_limit(limit))
    assert refused.value.details == {"payload": too_large(limit)}
    assert not Job.objects.exists()


def test_a_payload_of_exactly_the_limit_is_taken_one_more_byte_is_not(body_limit):
    # In bytes of UTF-8: "é" is two of them.
    fitting = {"blob": "é" + "x" * (body_limit - AROUND - 2)}
    assert state.enqueue("noop", fitting)["payload"] == fitting
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", {"blob": "é" + fitting["blob"][1:] + "x"})
    assert refused.value.details == {"payload": too_large()}
    assert Job.objects.count() == 1


def test_a_refused_payload_leaves_the_callers_transaction_usable(body_limit):
    with transaction.atomic():
        before = state.enqueue("noop", {"n": 1})
        with pytest.raises(state.JobValidationError) as refused:
            state.enqueue("noop", over_the_limit())
        after = state.enqueue("noop", {"n": 2})
    assert refused.value.details == {"payload": too_large()}
    assert {str(i) for i in Job.objects.values_list("id", flat=True)} == {
        before["id"],
        after["id"],
    }


@pytest.mark.parametrize(
    "options",
    [
        {"cron": "0 4 * * *"},
        {"idempotency_key": "big-payload"},
        {"depends_on": "upstream"},
        {"scheduled_at": "later"},
    ],
    ids=["schedule", "idempotency key", "dependent", "scheduled"],
)
def test_every_way_to_enqueue_refuses_a_payload_over_the_limit(body_limit, options):
    if options.get("depends_on"):
        options = {"depends_on": uuid.UUID(state.enqueue("noop", {})["id"])}
    if options.get("scheduled_at"):
        options = {"scheduled_at": timezone.now() + timedelta(hours=1)}
    jobs_before = Job.objects.count()
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", over_the_limit(), **options)
    assert refused.value.details == {"payload": too_large()}
    assert Job.objects.count() == jobs_before
    assert not Schedule.objects.exists()
    if "idempotency_key" in options:  # the key was not spent by the refused request
        state.enqueue("noop", {}, idempotency_key="big-payload")
        assert Job.objects.count() == jobs_before + 1


def test_a_batch_with_a_payload_over_the_limit_names_its_index_and_writes_nothing(body_limit):
    specs = [
        state.JobSpec("noop", {}),
        state.JobSpec("noop", over_the_limit()),
        state.JobSpec("noop", {}, priority=7),
    ]
    with transaction.atomic():
        with pytest.raises(state.JobValidationError) as refused:
            state.enqueue_many(specs)
        assert not Job.objects.exists()  # and the transaction still answers
    assert refused.value.details == {
        "1.payload": too_large(),
        "2.priority": ["Must be 1, 2 or 3."],
    }


# The claim reads the database's clock, which stands still in a test's own transaction.
@pytest.mark.django_db(transaction=True)
def test_a_dead_letters_edited_payload_over_the_limit_is_refused_and_it_stays(body_limit):
    now = timezone.now()
    worker = Worker.objects.create(
        hostname="edit", pid=os.getpid(), started_at=now, heartbeat_at=now
    )
    job = state.enqueue("noop", {"n": 1}, max_retries=1)
    (claim,) = state.claim(worker.id, 1, [uuid.UUID(job["id"])])
    fail_attempt(
        claim.id,
        claim.attempt_id,
        error_type="RuntimeError",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(0),
    )
    with transaction.atomic():
        with pytest.raises(state.JobValidationError) as refused:
            state.retry_with_payload(claim.id, over_the_limit())
        assert Job.objects.filter(id=claim.id, in_dlq=True, payload={"n": 1}).exists()
    assert refused.value.details == {"payload": too_large()}


def test_post_jobs_refuses_a_body_under_the_limit_whose_payload_is_over_it(
    body_limit, operator_client
):
    # `1E9` takes 3 bytes of the body and 12 as the JSON stored (`1000000000.0`).
    payload = {"n": [1e9] * (body_limit // 8)}
    numbers = ",".join(["1E9"] * len(payload["n"]))
    body = '{"type": "noop", "priority": 2, "payload": {"n": [' + numbers + "]}}"
    assert len(body) <= body_limit
    response = operator_client.post("/api/v1/jobs", body, content_type="application/json")
    assert response.status_code == 400, response.content
    size = len(json.dumps(payload, separators=(",", ":")))
    assert response.json()["error"]["details"] == {
        "payload": [f"payload is {size:,} bytes as JSON, over API_MAX_BODY_BYTES ({body_limit:,})."]
    }
    assert not Job.objects.exists()


class Prio(models.IntegerChoices):
    HIGH = 1
    LOW = 3


class Attempts(models.IntegerChoices):
    FEW = 2


def test_an_integer_choice_is_taken_and_stored_as_its_int():
    job = state.enqueue("noop", {}, priority=Prio.HIGH, max_retries=Attempts.FEW)
    (batched,) = state.enqueue_many(
        [state.JobSpec("noop", {}, priority=Prio.LOW, max_retries=Attempts.FEW)],
        batch_size=Attempts.FEW,
    )
    first_run = state.enqueue("noop", {}, priority=Prio.HIGH, cron="0 4 * * *")
    assert [(j["priority"], j["max_retries"]) for j in (job, batched)] == [(1, 2), (3, 2)]
    assert first_run["priority"] == 1
    assert sorted(Job.objects.values_list("priority", flat=True)) == [1, 1, 3]
    assert Schedule.objects.get().priority == 1
    assert all(type(j["priority"]) is int for j in (job, batched, first_run))


def test_an_integer_choice_and_its_int_are_the_same_request_under_a_key():
    first = state.enqueue("noop", {}, priority=Prio.HIGH, idempotency_key="prio")
    assert state.enqueue("noop", {}, priority=1, idempotency_key="prio")["id"] == first["id"]


@pytest.mark.parametrize("field", ["priority", "max_retries"])
def test_a_bool_is_still_no_integer(field):
    arguments: dict[str, Any] = {field: True}
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", {}, **arguments)
    assert list(refused.value.details) == [field]
    with pytest.raises(ValueError, match="got True"):
        state.enqueue_many([state.JobSpec("noop", {})], batch_size=True)
    assert not Job.objects.exists()


def test_a_blank_time_zone_is_refused_as_post_jobs_refuses_it(operator_client):
    response = operator_client.post(
        "/api/v1/jobs",
        {"type": "noop", "payload": {}, "priority": 2, "cron": "0 4 * * *", "timezone": ""},
        format="json",
    )
    assert response.status_code == 400
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", {}, cron="0 4 * * *", timezone="")
    assert refused.value.details == response.json()["error"]["details"]
    assert refused.value.details == {"timezone": ["This field may not be blank."]}
    assert not Job.objects.exists()
    assert not Schedule.objects.exists()
