"""A cron schedule's series as an operator of Oban's Cron or Celery beat would drive it: a
run held in the dead-letter queue, edited, retried and resumed; every run of the
series is what the schedule says. Time passes in the data: a run's slot is moved into the
past, as a worker would find it once its slot came."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from jobs import state
from jobs.models import Job

from .test_state import new_worker

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
SCHEDULES = "/api/v1/schedules"


# Daily: the slot after now stays the same for the whole of a test.
DAILY = "0 0 * * *"


def slot_passed(job_id: str) -> None:
    """The daily run waits since its slot of a day earlier, which has passed."""
    a_day = timedelta(days=1)
    Job.objects.filter(id=job_id).update(
        scheduled_at=F("scheduled_at") - a_day, run_at=F("run_at") - a_day
    )


def claimed(job_id: str, worker_id: uuid.UUID | None = None) -> state.ClaimedJob:
    (claim,) = state.claim(worker_id or new_worker().id, 1, [uuid.UUID(job_id)])
    return claim


def complete(job_id: str) -> state.CompletionReport:
    worker_id = new_worker().id
    claim = claimed(job_id, worker_id)
    success = state.Success(claim.id, claim.attempt_id, None, timezone.now())
    return state.complete([success], worker_id)


def into_the_dlq(job_id: str) -> None:
    """The run's slot came, a worker ran it, and its last attempt failed."""
    slot_passed(job_id)
    claim = claimed(job_id)
    failure = state.Failure(
        claim.id,
        claim.attempt_id,
        error_type="KeyError",
        error_message="'report'",
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
        finished_at=timezone.now(),
    )
    (failed,) = state.fail([failure]).failed
    assert failed["in_dlq"]


def waiting_run(client: Any, schedule_id: str) -> dict[str, Any]:
    schedule = client.get(f"{SCHEDULES}/{schedule_id}").json()
    assert schedule["current_run_id"] is not None, schedule
    run: dict[str, Any] = client.get(f"{JOBS}/{schedule['current_run_id']}").json()
    assert run["status"] == "pending"
    assert run["scheduled_at"] == schedule["next_runs"][0]
    return run


def test_a_dead_letters_edited_payload_is_that_runs_not_the_series(operator_client):
    # A run whose payload no longer suits its handler is edited from the DLQ and retried.
    # The run after it took the edited payload while the schedule still showed its own, and
    # a pause and resume (or a cancelled run) went back to the schedule's: which payload a
    # run got depended on how it was created. Every run is the schedule's, as Oban's and
    # Celery beat's entries insert their own arguments each time.
    first = state.enqueue("noop", {"report": "daily"}, cron=DAILY, max_retries=1)
    schedule_id = first["schedule_id"]
    into_the_dlq(first["id"])
    state.retry_with_payload(uuid.UUID(first["id"]), {"report": "daily", "rows": 10})

    (following,) = complete(first["id"]).created
    done = operator_client.get(f"{JOBS}/{first['id']}").json()
    assert (done["status"], done["payload"]) == ("completed", {"report": "daily", "rows": 10})
    assert following["payload"] == {"report": "daily"}
    assert waiting_run(operator_client, schedule_id)["payload"] == {"report": "daily"}
    assert operator_client.get(f"{SCHEDULES}/{schedule_id}").json()["payload"] == {
        "report": "daily"
    }


def test_a_held_schedule_resumed_goes_on_from_now_and_its_dead_letter_stays(operator_client):
    # Reported as "a resume of a held schedule creates nothing": that happens only to a dead
    # letter whose slot is still ahead of the resuming clock, which a run claimed by the
    # database's clock reaches only when the web host's clock is behind it. Once its slot
    # has passed, as it has for any run a worker ran, the resume starts the series again.
    first = state.enqueue("noop", {}, cron=DAILY, max_retries=1)
    schedule_id = first["schedule_id"]
    into_the_dlq(first["id"])

    resumed = operator_client.post(f"{SCHEDULES}/{schedule_id}/resume")
    assert resumed.status_code == 200
    following = waiting_run(operator_client, schedule_id)
    assert following["id"] != first["id"]
    assert datetime.fromisoformat(following["scheduled_at"]) > timezone.now()
    dead = operator_client.get(f"{JOBS}/{first['id']}").json()
    assert (dead["status"], dead["in_dlq"]) == ("failed", True)

    # Retried after all, the dead letter runs once; its next slot is the waiting run's.
    assert operator_client.post(f"{JOBS}/{first['id']}/retry").status_code == 200
    assert complete(first["id"]).created == []
    assert waiting_run(operator_client, schedule_id)["id"] == following["id"]


def test_a_held_schedule_whose_dead_letter_is_retried_goes_on_after_that_run(operator_client):
    first = state.enqueue("noop", {}, cron=DAILY, max_retries=1)
    schedule_id = first["schedule_id"]
    into_the_dlq(first["id"])
    assert operator_client.post(f"{JOBS}/{first['id']}/retry").status_code == 200
    # The retried run is the series' run: a resume adds no second one.
    resumed = operator_client.post(f"{SCHEDULES}/{schedule_id}/resume").json()
    assert resumed["current_run_id"] == first["id"]
    assert Job.objects.filter(schedule_id=schedule_id).count() == 1

    (following,) = complete(first["id"]).created
    assert waiting_run(operator_client, schedule_id)["id"] == following["id"]
    assert datetime.fromisoformat(following["scheduled_at"]) > timezone.now()
