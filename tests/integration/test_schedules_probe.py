"""Cron schedules probed as an operator would: what a schedule lists while its series is
held by a run in the dead-letter queue, and how a cron that names no real date is refused."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import AuditEntry, Job
from jobs.recurrence import cron_errors
from tests.attempts import fail_attempt
from tests.console.helpers import login

from .test_state import new_worker

JOBS = "/api/v1/jobs"
SCHEDULES = "/api/v1/schedules"


def fail_before_its_slot(job_id: str) -> dict[str, Any]:
    """Run a schedule's waiting run before its slot and fail it: into the DLQ when it had
    one attempt, else waiting for its retry."""
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(minutes=1))
    (claimed,) = state.claim(new_worker().id, 1, [uuid.UUID(job_id)])
    failed = fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="RuntimeError",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
    )
    assert failed is not None and failed["status"] == "failed"
    return failed


def run_into_the_dlq(job_id: str) -> None:
    assert fail_before_its_slot(job_id)["in_dlq"]


@pytest.mark.django_db
def test_a_schedule_held_by_a_dead_letter_lists_no_next_runs_until_it_goes_on(
    operator, operator_client, superuser_client
):
    # A run in the DLQ holds its series: no run is created until it is retried or the
    # schedule resumed. The schedule listed five next runs all the same, none of which came.
    first = state.enqueue("noop", {}, cron="*/5 * * * *", max_retries=1)
    schedule = f"{SCHEDULES}/{first['schedule_id']}"
    run_into_the_dlq(first["id"])

    held = operator_client.get(schedule).json()
    assert (held["paused"], held["current_run_id"], held["next_runs"]) == (False, None, [])
    assert operator_client.get(SCHEDULES).json()["results"] == [held]
    # The console and the admin say why, rather than "none while paused" or "paused".
    console = login(operator)
    assert "none: its last run is a dead letter" in console.get("/schedules").content.decode()
    admin_list = superuser_client.get("/admin/jobs/schedule/").content.decode()
    assert "held: its last run is a dead letter" in admin_list

    # Retried, the run is its series' waiting run again, and the next runs are back.
    assert operator_client.post(f"{JOBS}/{first['id']}/retry").status_code == 200
    going_on = operator_client.get(schedule).json()
    assert going_on["current_run_id"] == first["id"]
    assert len(going_on["next_runs"]) == 5


@pytest.mark.django_db
def test_a_schedule_whose_dead_letter_was_purged_lists_no_next_runs_until_resumed(
    operator_client,
):
    first = state.enqueue("noop", {}, cron="0 * * * *", max_retries=1)
    schedule = f"{SCHEDULES}/{first['schedule_id']}"
    run_into_the_dlq(first["id"])
    assert operator_client.delete(f"{JOBS}/{first['id']}/purge").status_code == 204

    assert operator_client.get(schedule).json()["next_runs"] == []
    resumed = operator_client.post(f"{schedule}/resume").json()
    waiting = operator_client.get(f"{JOBS}/{resumed['current_run_id']}").json()
    assert waiting["status"] == "pending"
    assert resumed["next_runs"][0] == waiting["scheduled_at"]
    assert uuid.UUID(resumed["current_run_id"]) != uuid.UUID(first["id"])
    # A resume of a schedule that was not paused, which did something: it is in the audit
    # log, naming the run it created (a resume that changes nothing is not).
    (entry,) = AuditEntry.objects.filter(action="schedule_resume")
    assert (entry.before, entry.after) == (
        {"paused": False},
        {"paused": False, "runs": [resumed["current_run_id"]]},
    )


@pytest.mark.django_db
@pytest.mark.parametrize("stop", ["pause", "delete"])
def test_a_run_waiting_for_its_retry_is_cancelled_when_its_schedule_stops(operator_client, stop):
    # Only runs waiting for their slot were cancelled: one waiting for its retry ran while
    # the schedule was paused, or after it was deleted.
    first = state.enqueue("noop", {}, cron="*/5 * * * *", max_retries=3)
    schedule = f"{SCHEDULES}/{first['schedule_id']}"
    assert not fail_before_its_slot(first["id"])["in_dlq"]
    if stop == "pause":
        assert operator_client.post(f"{schedule}/pause").status_code == 200
    else:
        assert operator_client.delete(schedule).status_code == 204
    run = operator_client.get(f"{JOBS}/{first['id']}").json()
    assert (run["status"], run["next_retry_at"]) == ("cancelled", None)
    stats = operator_client.get(f"{JOBS}/stats").json()
    assert (stats["failed"], stats["cancelled"]) == (0, 1)


@pytest.mark.parametrize(
    "cron", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 FEB *", "0 0 31 2-4/2 *"]
)
def test_a_date_no_month_has_is_refused_as_never_matching(cron):
    # Said before as "Not a valid cron expression: Bad day-of-month.": the client went
    # looking for a typo in a well-formed expression.
    assert cron_errors(cron, "UTC") == {
        "cron": ["Never matches a date: none of its months has that day."]
    }


@pytest.mark.django_db
def test_the_api_refuses_february_30th_saying_it_never_comes(operator_client):
    body = {"type": "noop", "payload": {}, "priority": 2, "cron": "0 0 30 2 *"}
    response = operator_client.post(JOBS, {**body, "timezone": "Europe/Berlin"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "validation_error",
        "message": "Invalid input: cron.",
        "details": {"cron": ["Never matches a date: none of its months has that day."]},
    }
    assert operator_client.get(SCHEDULES).json()["count"] == 0


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 0 32 * *", "Not a valid cron expression: Bad day-of-month."),
        ("0 0 30 13 *", "Not a valid cron expression: Bad month."),
        ("0 0 31 2 MON", None),  # day-of-month or day-of-week: every Monday of February
        ("0 0 29 2 *", None),  # leap years
    ],
)
def test_a_bad_field_is_still_named_and_a_rare_date_is_taken(cron, message):
    assert cron_errors(cron, "UTC") == ({"cron": [message]} if message else {})
