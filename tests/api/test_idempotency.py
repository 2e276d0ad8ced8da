"""Idempotency keys on POST /jobs and `enqueue`: a repeat gets the first job, a different
body under the same key is a 409, and racing repeats create one job."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import IdempotencyKey, Job
from tests.conftest import token_client

JOBS = "/api/v1/jobs"
BODY = {"type": "noop", "payload": {"n": 1}, "priority": 2}


def post(client: Any, body: dict[str, Any], key: str) -> Any:
    return client.post(JOBS, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.django_db
def test_a_repeat_returns_the_first_job_with_200(operator_client):
    first = post(operator_client, BODY, "order-42")
    again = post(operator_client, {**BODY, "payload": {"n": 1}}, "order-42")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert again["Location"] == first["Location"]
    assert Job.objects.count() == 1
    other = post(operator_client, BODY, "order-43")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    without_key = operator_client.post(JOBS, BODY, format="json")
    assert without_key.status_code == 201


@pytest.mark.django_db
def test_the_same_key_with_a_different_body_is_a_409_that_says_so(operator_client):
    first = post(operator_client, BODY, "order-42").json()
    response = post(operator_client, {**BODY, "priority": 1}, "order-42")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert "different request" in error["message"] and first["id"] in error["message"]
    assert error["details"] == {"idempotency_key": "order-42", "job_id": first["id"]}
    assert Job.objects.count() == 1


BATCH = f"{JOBS}/batch"
BATCH_BODY = {"jobs": [BODY, {**BODY, "payload": {"n": 2}}, {**BODY, "priority": 3}]}


@pytest.mark.django_db
def test_a_repeated_batch_returns_its_first_jobs_and_a_different_one_is_a_409(operator_client):
    # A client retrying a batch whose answer it lost (a timeout) under the same key: the key
    # was ignored on this route, and the retry created every job again.
    first = operator_client.post(BATCH, BATCH_BODY, format="json", HTTP_IDEMPOTENCY_KEY="b-1")
    again = operator_client.post(BATCH, BATCH_BODY, format="json", HTTP_IDEMPOTENCY_KEY="b-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert Job.objects.count() == 3
    # Another batch, or one job, under that key: refused, naming the batch's first job.
    other = {"jobs": BATCH_BODY["jobs"][:2]}
    first_id = first.json()["jobs"][0]["id"]
    for path, body in ((BATCH, other), (JOBS, BODY)):
        refused = operator_client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="b-1")
        assert refused.status_code == 409
        assert refused.json()["error"]["details"] == {"idempotency_key": "b-1", "job_id": first_id}
    # A job's key is not a batch's either.
    post(operator_client, BODY, "one")
    refused = operator_client.post(BATCH, BATCH_BODY, format="json", HTTP_IDEMPOTENCY_KEY="one")
    assert refused.status_code == 409
    # A bad key is refused before anything is written.
    bad = operator_client.post(BATCH, BATCH_BODY, format="json", HTTP_IDEMPOTENCY_KEY="caf\u00e9")
    assert list(bad.json()["error"]["details"]) == ["idempotency_key"]
    assert Job.objects.count() == 4


@pytest.mark.django_db
def test_a_batch_whose_first_job_was_purged_is_still_answered_not_created_again(
    operator_client,
):
    # The key was bound to the batch's first job: its purge (or pruning) deleted the key,
    # and the client's retry created every job of the batch a second time.
    first = operator_client.post(BATCH, BATCH_BODY, format="json", HTTP_IDEMPOTENCY_KEY="b-2")
    ids = [job["id"] for job in first.json()["jobs"]]
    Job.objects.filter(id=ids[0]).update(status="failed", in_dlq=True)
    state.purge(ids[0])
    again = operator_client.post(BATCH, BATCH_BODY, format="json", HTTP_IDEMPOTENCY_KEY="b-2")
    assert again.status_code == 200
    assert [job["id"] for job in again.json()["jobs"]] == ids[1:]
    assert Job.objects.count() == 2
    other = {"jobs": BATCH_BODY["jobs"][:2]}
    refused = operator_client.post(BATCH, other, format="json", HTTP_IDEMPOTENCY_KEY="b-2")
    assert refused.json()["error"]["details"] == {"idempotency_key": "b-2", "job_id": ids[0]}


@pytest.mark.django_db
def test_enqueue_many_once_takes_any_iterable_and_refuses_what_enqueue_many_refuses():
    specs = [state.JobSpec("noop", {"n": n}) for n in range(3)]
    jobs, created = state.enqueue_many_once("gen-1", iter(specs))
    assert created and len(jobs) == 3
    again, created = state.enqueue_many_once("gen-1", iter(specs))
    assert not created and [job["id"] for job in again] == [job["id"] for job in jobs]
    # As enqueue takes a key, so does enqueue_many.
    assert state.enqueue_many(specs, idempotency_key="gen-1") == again
    with pytest.raises(TypeError, match="item 1 is a dict, not a JobSpec"):
        state.enqueue_many_once("gen-2", [specs[0], {"type": "noop"}])
    assert Job.objects.count() == 3


@pytest.mark.django_db
def test_a_bad_key_is_a_400_and_creates_nothing(operator_client):
    for key in ["x" * 256, "caf\u00e9", "tab\there"]:
        response = post(operator_client, BODY, key)
        assert response.status_code == 400
        assert response.json()["error"]["details"] == {
            "idempotency_key": [
                "Must be 1 to 255 printable ASCII characters, not starting or ending with a space."
            ]
        }
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_enqueue_takes_the_key_and_it_expires_with_the_window_or_its_job():
    first = state.enqueue("noop", {"n": 1}, idempotency_key="k")
    assert state.enqueue("noop", {"n": 1}, idempotency_key="k")["id"] == first["id"]
    with pytest.raises(state.IdempotencyKeyReused):
        state.enqueue("noop", {"n": 2}, idempotency_key="k")
    # Past the window the key is free again, for any body.
    IdempotencyKey.objects.filter(key="k").update(created_at=timezone.now() - timedelta(hours=25))
    second = state.enqueue("noop", {"n": 2}, idempotency_key="k")
    assert second["id"] != first["id"]
    # A key goes with its job (here its purge, which is SQL): the next request creates anew.
    Job.objects.filter(id=second["id"]).update(status="failed", in_dlq=True)
    state.purge(second["id"])
    assert not IdempotencyKey.objects.exists()
    assert state.enqueue("noop", {"n": 2}, idempotency_key="k")["id"] != second["id"]


def test_a_default_given_is_the_same_request_as_a_default_left_out(db, settings):
    first = state.enqueue("noop", {}, idempotency_key="k")
    default = settings.SCHEDULER_DEFAULT_MAX_RETRIES
    again = state.enqueue("noop", {}, max_retries=default, idempotency_key="k")
    assert again["id"] == first["id"]
    (batch,) = state.enqueue_many([state.JobSpec("noop", {})], idempotency_key="b")
    spelled = [state.JobSpec("noop", {}, priority=2, max_retries=default)]
    assert [job["id"] for job in state.enqueue_many(spelled, idempotency_key="b")] == [batch["id"]]
    with pytest.raises(state.IdempotencyKeyReused):
        state.enqueue("noop", {}, max_retries=default + 1, idempotency_key="k")


@pytest.mark.django_db(transaction=True)
def test_racing_repeats_create_one_job_and_all_get_it(operator):
    racers = 6
    start = threading.Barrier(racers)
    responses: list[Any] = [None] * racers

    def send(index: int) -> None:
        try:
            client = token_client(operator)
            start.wait()
            responses[index] = post(client, BODY, "race-1")
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * (racers - 1) + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert Job.objects.count() == 1


BAD_KEY = ["Must be 1 to 255 printable ASCII characters, not starting or ending with a space."]


@pytest.mark.parametrize(
    ("body", "field"),
    [({**BODY, "colour": "red"}, "colour"), ({**BODY, "type": "no_such_type"}, "type")],
    ids=["refused-by-its-form", "refused-by-the-domain"],
)
@pytest.mark.django_db
def test_a_bad_key_is_reported_with_the_body_s_errors_in_one_answer(operator_client, body, field):
    # The key's error came only once the body was right: a round trip per mistake.
    response = post(operator_client, body, "caf\u00e9")
    assert response.status_code == 400
    error = response.json()["error"]
    assert list(error["details"]) == [field, "idempotency_key"]
    assert error["details"]["idempotency_key"] == BAD_KEY
    assert error["message"] == f"Invalid input: {field}, idempotency_key."
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (
            {"jobs": [BODY, {**BODY, "colour": "red"}], "extra": 1},
            ["extra", "jobs.1.colour"],
        ),
        ({"jobs": [BODY, {**BODY, "type": "no_such_type"}]}, ["jobs.1.type"]),
    ],
    ids=["refused-by-its-form", "refused-by-the-domain"],
)
@pytest.mark.django_db
def test_a_bad_key_is_reported_with_the_batch_s_errors_in_one_answer(operator_client, body, fields):
    response = operator_client.post(BATCH, body, format="json", HTTP_IDEMPOTENCY_KEY=" b")
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert list(details) == [*fields, "idempotency_key"], details
    assert details["idempotency_key"] == BAD_KEY
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_bad_batch_under_a_used_key_is_a_400_as_a_bad_job_is(operator_client):
    # Validation runs before the key is looked at: a wrong request is a 400 whatever the key
    # holds. The batch looked at the key first, and a wrong batch under a used key was the
    # key's 409, its own errors unsaid.
    bad_job = {**BODY, "priority": 9}
    for path, first, bad, field in (
        (JOBS, BODY, bad_job, "priority"),
        (BATCH, BATCH_BODY, {"jobs": [BODY, bad_job]}, "jobs.1.priority"),
    ):
        assert post_to(operator_client, path, first, path).status_code == 201
        response = post_to(operator_client, path, bad, path)
        assert response.status_code == 400, (path, response.json())
        assert response.json()["error"]["details"] == {field: ["Must be 1, 2 or 3."]}
    specs = [state.JobSpec("noop", {"n": 1}), state.JobSpec("noop", {"n": 1}, priority=9)]
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue_many(specs, idempotency_key=BATCH)
    assert refused.value.details == {"1.priority": ["Must be 1, 2 or 3."]}
    assert Job.objects.count() == 1 + len(BATCH_BODY["jobs"])


def post_to(client: Any, path: str, body: dict[str, Any], key: str) -> Any:
    return client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)
