"""Replays under an `Idempotency-Key` answer as the first request did, on both routes: a
`scheduled_at` that has passed since does not turn a replay into a 400, a replay says it
is one (`Idempotent-Replayed: true`), and the upstream jobs of `depends_on` are a set.
A batch says plainly that it takes no `depends_on`, `cron` or `timezone`."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs import state
from jobs.models import IdempotencyKey, Job

from .conftest import iso
from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
BATCH = f"{JOBS}/batch"
REPLAYED = "Idempotent-Replayed"


def noop(**fields: Any) -> dict[str, Any]:
    return {"type": "noop", "payload": {"n": 1}, "priority": 2, **fields}


def post(client: Any, path: str, body: dict[str, Any], key: str | None = None) -> Any:
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(path, body, format="json", **headers)


def soon() -> datetime:
    """A whole second at least 3 s ahead: in the future for the first request however busy
    the machine, and soon past."""
    return (timezone.now() + timedelta(seconds=4)).replace(microsecond=0)


def wait_until_past(moment: datetime) -> None:
    """Real time passes: what was in the future at the first request is past at its replay
    (the key's window, counted by the database, still holds it)."""
    while timezone.now() <= moment:
        time.sleep(0.05)


def test_a_replay_whose_scheduled_at_has_passed_answers_the_first_job(operator_client):
    # The client's retry of a request that succeeded got 400 "Must be in the future" on
    # POST /jobs, where the same retry through POST /jobs/batch got its jobs.
    due_at = soon()
    due = iso(due_at)
    first = post(operator_client, JOBS, noop(scheduled_at=due), "later-1")
    batch = post(operator_client, BATCH, {"jobs": [noop(scheduled_at=due)]}, "later-2")
    assert (first.status_code, batch.status_code) == (201, 201)
    wait_until_past(due_at)
    again = post(operator_client, JOBS, noop(scheduled_at=due), "later-1")
    assert again.status_code == 200, again.json()
    assert again.json()["id"] == first.json()["id"]
    assert again["Location"] == first["Location"]
    batch_again = post(operator_client, BATCH, {"jobs": [noop(scheduled_at=due)]}, "later-2")
    assert batch_again.status_code == 200
    assert batch_again.json() == batch.json()
    assert Job.objects.count() == 2
    # Only a replay: the same body under a new key, or none, is refused as before.
    for key in ("later-3", None):
        error = assert_error(
            post(operator_client, JOBS, noop(scheduled_at=due), key), 400, "validation_error"
        )
        assert error["details"] == {"scheduled_at": [state.NOT_IN_THE_FUTURE]}
    # Another body under the key is the key's conflict, as on the batch route.
    other = post(operator_client, JOBS, noop(scheduled_at=due, priority=1), "later-1")
    conflict = assert_error(other, 409, "idempotency_key_reused")
    assert conflict["details"]["job_id"] == first.json()["id"]
    # A replay that is wrong in a way time does not explain is still a 400.
    error = assert_error(
        post(operator_client, JOBS, noop(scheduled_at=due, max_retries=0), "later-1"),
        400,
        "validation_error",
    )
    assert set(error["details"]) == {"scheduled_at", "max_retries"}
    # Past the window the key is free: the request is a new one, and its time has passed.
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(days=2))
    error = assert_error(
        post(operator_client, JOBS, noop(scheduled_at=due), "later-1"), 400, "validation_error"
    )
    assert error["details"] == {"scheduled_at": [state.NOT_IN_THE_FUTURE]}
    assert Job.objects.count() == 2
    # The key still names its first job (the refused request took nothing).
    assert str(IdempotencyKey.objects.get(key="later-1").job_id) == first.json()["id"]


def test_enqueue_replays_a_passed_scheduled_at_too(db):
    due = soon()
    first = state.enqueue("noop", {}, scheduled_at=due, idempotency_key="py-1")
    wait_until_past(due)
    assert state.enqueue("noop", {}, scheduled_at=due, idempotency_key="py-1") == first
    with pytest.raises(state.JobValidationError, match="future"):
        state.enqueue("noop", {}, scheduled_at=due, idempotency_key="py-2")


def test_a_replay_says_it_is_one_on_both_routes(operator_client):
    for path, body in ((JOBS, noop()), (BATCH, {"jobs": [noop(), noop(priority=3)]})):
        first = post(operator_client, path, body, f"say{path}")
        again = post(operator_client, path, body, f"say{path}")
        assert (first.status_code, again.status_code) == (201, 200)
        assert REPLAYED not in first
        assert again[REPLAYED] == "true"
        assert again.json() == first.json()
        # Neither a new key, nor no key, nor a conflict is a replay.
        for key in (f"new{path}", None):
            created = post(operator_client, path, body, key)
            assert created.status_code == 201 and REPLAYED not in created
        other = {"type": "noop", "payload": {"n": 9}, "priority": 1}
        other_body = other if path == JOBS else {"jobs": [other]}
        refused = post(operator_client, path, other_body, f"say{path}")
        assert refused.status_code == 409 and REPLAYED not in refused


def test_the_document_names_the_replay_header_on_each_replay():
    document = Client().get("/api-docs.json").json()
    for path in (JOBS, BATCH):
        responses = document["paths"][path]["post"]["responses"]
        header = responses["200"]["headers"][REPLAYED]
        assert header["required"] is True
        assert header["schema"] == {"type": "string", "enum": ["true"]}
        assert REPLAYED not in responses["201"].get("headers", {})


def test_the_upstream_jobs_of_a_replay_are_a_set(operator_client):
    # The same upstream jobs in another order (a client's `list(set_of_ids)` differs from
    # one process to the next), written in capitals, given twice, or one id given alone
    # or as a list: the same job waits on the same jobs, and a retry got a 409.
    a, b = (state.enqueue("noop", {"n": n})["id"] for n in (1, 2))
    first = post(operator_client, JOBS, noop(depends_on=[a, b]), "fan-1")
    assert first.status_code == 201
    for given in ([b, a], [a.upper(), b], [b, a, b]):
        again = post(operator_client, JOBS, noop(depends_on=given), "fan-1")
        assert again.status_code == 200, (given, again.json())
        assert again.json()["id"] == first.json()["id"]
        assert again.json()["upstream_ids"] == [a, b]  # as the first request created it
    alone = post(operator_client, JOBS, noop(depends_on=a), "fan-2")
    assert post(operator_client, JOBS, noop(depends_on=[a]), "fan-2").json() == alone.json()
    # Through Python too: a string id in capitals is that job.
    job = state.enqueue("noop", {}, depends_on=[b.upper(), a], idempotency_key="fan-3")
    assert state.enqueue("noop", {}, depends_on=[a, b], idempotency_key="fan-3") == job
    # Another set of upstream jobs is another request.
    refused = post(operator_client, JOBS, noop(depends_on=[a]), "fan-1")
    assert_error(refused, 409, "idempotency_key_reused")
    assert Job.objects.count() == 5


def test_a_default_written_out_is_the_same_request(operator_client):
    # The queue a job goes to when none is named, and UTC for a cron schedule's time zone:
    # a client that writes them out on its retry asks for the same job, and got a 409.
    first = post(operator_client, JOBS, noop(), "default-1")
    again = post(operator_client, JOBS, noop(queue="default"), "default-1")
    assert again.status_code == 200, again.json()
    assert again.json()["id"] == first.json()["id"]
    batch = post(operator_client, BATCH, {"jobs": [noop()]}, "default-2")
    again = post(operator_client, BATCH, {"jobs": [noop(queue="default")]}, "default-2")
    assert again.status_code == 200 and again.json() == batch.json()
    daily = post(operator_client, JOBS, noop(cron="0 3 * * *"), "default-3")
    again = post(operator_client, JOBS, noop(cron="0 3 * * *", timezone="UTC"), "default-3")
    assert again.status_code == 200 and again.json()["id"] == daily.json()["id"]
    # Another queue, or another zone, is another request.
    other = post(operator_client, JOBS, noop(queue="other"), "default-1")
    assert_error(other, 409, "idempotency_key_reused")
    paris = post(
        operator_client, JOBS, noop(cron="0 3 * * *", timezone="Europe/Paris"), "default-3"
    )
    assert_error(paris, 409, "idempotency_key_reused")


def _as_written_before(spec: state.JobSpec) -> str:
    """The fingerprint a key stored before `depends_on` was taken as a set: the request's
    fields as given, in canonical JSON."""

    def canonical(value: object) -> str:
        return value.astimezone(UTC).isoformat() if isinstance(value, datetime) else str(value)

    fields = asdict(replace(spec, max_retries=spec.max_retries or 3))
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=canonical)
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_key_stored_before_the_set_still_answers_its_replay(operator_client):
    a, b = (state.enqueue("noop", {"n": n})["id"] for n in (1, 2))
    first = post(operator_client, JOBS, noop(depends_on=[b, a]), "old-1").json()
    written_before = _as_written_before(state.JobSpec("noop", {"n": 1}, depends_on=[b, a]))
    IdempotencyKey.objects.filter(key="old-1").update(fingerprint=written_before)
    again = post(operator_client, JOBS, noop(depends_on=[b, a]), "old-1")
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert_error(
        post(operator_client, JOBS, noop(depends_on=[a]), "old-1"), 409, "idempotency_key_reused"
    )
    assert Job.objects.count() == 3


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "depends_on",
            "3f7a1c2d-0000-4000-8000-000000000000",
            "depends_on is not taken in a batch: create the job with POST /api/v1/jobs.",
        ),
        ("depends_on", None, "depends_on is not taken in a batch"),
        (
            "cron",
            "0 * * * *",
            "cron is not taken in a batch: create the schedule with POST /api/v1/jobs.",
        ),
        ("timezone", "UTC", "timezone is not taken in a batch"),
    ],
)
def test_a_batch_says_plainly_what_it_does_not_take(operator_client, field, value, message):
    # "Unknown field" read as if the API had no such field at all.
    body = {"jobs": [noop(), noop(**{field: value})]}
    error = assert_error(post(operator_client, BATCH, body), 400, "validation_error")
    assert list(error["details"]) == [f"jobs.1.{field}"]
    (said,) = error["details"][f"jobs.1.{field}"]
    assert said.startswith(message) and "Unknown field" not in said
    # An unknown field is still one, beside it.
    body = {"jobs": [noop(**{field: value, "colour": "red"})]}
    details = assert_error(post(operator_client, BATCH, body), 400, "validation_error")["details"]
    assert set(details) == {f"jobs.0.{field}", "jobs.0.colour"}
    assert details["jobs.0.colour"][0].startswith("Unknown field.")
    assert Job.objects.count() == 0
