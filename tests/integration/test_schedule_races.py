"""Cron schedules under races between separate connections: an operator's pause or delete
against a worker's completion or another operator's cancel of the schedule's run, and two
completions that would create the same slot.

A race is made to happen, not hoped for: the first transaction takes its run's row lock (as
the first statement of its transition does) and waits until the operator's action waits on
a lock too (or is done); then the transition goes on."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs import state
from jobs.models import Job, Schedule, Worker
from tests.console.test_admin import hidden_fields

from .test_state import in_thread, join, new_worker

pytestmark = pytest.mark.django_db(transaction=True)


def due_now(job_id: str) -> None:
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(minutes=1))


def waits_on_a_lock(thread: threading.Thread) -> None:
    """Until another connection of this database waits on a lock, or `thread` is done."""
    deadline = time.monotonic() + 20
    while thread.is_alive():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0]:
                return
        assert time.monotonic() < deadline, "the operator's action neither waited nor ended"
        time.sleep(0.02)


def race(run_id: str, transition: Callable[[], Any], action: Callable[[], None]) -> None:
    """`transition` of the run `run_id`, holding the run's row lock, against `action`;
    both must succeed."""
    locked, go = threading.Event(), threading.Event()

    def first() -> Any:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", [run_id])
            locked.set()
            assert go.wait(20)
            return transition()

    first_thread, first_outcome = in_thread(first)
    assert locked.wait(20)
    second_thread, second_outcome = in_thread(action)
    waits_on_a_lock(second_thread)
    go.set()
    join(first_thread, second_thread)
    # A deadlock aborted one of them: the operator got a 503 and the schedule went on, or
    # the worker's completion was rolled back.
    assert first_outcome.error is None, first_outcome.error
    assert second_outcome.error is None, second_outcome.error


def pending_runs(schedule_id: str) -> list[Job]:
    return list(Job.objects.filter(schedule_id=schedule_id, status="pending"))


def claimed_run() -> tuple[dict[str, Any], Worker, state.Success]:
    """The first run of a schedule every five minutes, claimed by a worker, and the report
    of its success, for a race to complete it."""
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    worker = new_worker()
    due_now(first["id"])
    (claim,) = state.claim(worker.id, 1, [uuid.UUID(first["id"])])
    return first, worker, state.Success(claim.id, claim.attempt_id, None, timezone.now())


@pytest.mark.parametrize("stop", ["pause", "delete"])
def test_a_schedule_stopped_while_its_run_completes_gets_no_next_run(stop):
    first, worker, success = claimed_run()
    schedule_id = first["schedule_id"]

    race(
        first["id"],
        lambda: state.complete([success], worker.id),
        lambda: getattr(state, f"{stop}_schedule")(uuid.UUID(schedule_id)),
    )
    assert Job.objects.get(id=first["id"]).status == "completed"
    # The run the completion created, if any, was cancelled by the pause or the delete.
    assert not Job.objects.filter(status="pending").exists()
    assert Schedule.objects.filter(id=schedule_id, paused=True).count() == (stop == "pause")


@pytest.mark.parametrize("stop", ["pause", "delete"])
def test_a_schedule_stopped_while_its_waiting_run_is_cancelled_gets_no_next_run(stop):
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    schedule_id = first["schedule_id"]

    race(
        first["id"],
        lambda: state.cancel(uuid.UUID(first["id"])),
        lambda: getattr(state, f"{stop}_schedule")(uuid.UUID(schedule_id)),
    )
    assert Job.objects.get(id=first["id"]).status == "cancelled"
    assert not Job.objects.filter(status="pending").exists()
    assert Schedule.objects.filter(id=schedule_id).count() == (stop == "pause")


def test_two_runs_completing_at_once_create_their_next_slot_once():
    # Two runs of one schedule wait at once when an operator resumed a schedule held by a
    # dead letter, then retried the dead letter too. Both are past their slots (midnight two
    # days and one day ago); completed together, each would create the next midnight.
    first = state.enqueue("noop", {}, cron="0 0 * * *", max_retries=1)
    schedule_id = uuid.UUID(first["schedule_id"])
    worker = new_worker()
    slot = datetime.fromisoformat(first["scheduled_at"])
    Job.objects.filter(id=first["id"]).update(
        scheduled_at=slot - timedelta(days=3), run_at=slot - timedelta(days=3)
    )
    (claim,) = state.claim(worker.id, 1, [uuid.UUID(first["id"])])
    failure = state.Failure(
        claim.id, claim.attempt_id, "E", "m", None, timedelta(minutes=5), timezone.now()
    )
    assert state.fail([failure]).failed[0]["in_dlq"]
    state.resume_schedule(schedule_id)
    (second,) = pending_runs(str(schedule_id))
    assert second.scheduled_at == slot
    Job.objects.filter(id=second.id).update(
        scheduled_at=slot - timedelta(days=2), run_at=slot - timedelta(days=2)
    )
    state.retry_from_dlq(uuid.UUID(first["id"]))
    claims = state.claim(worker.id, 2, [uuid.UUID(first["id"]), second.id])
    assert len(claims) == 2
    created, go = threading.Event(), threading.Event()

    def complete(claim: state.ClaimedJob) -> state.CompletionReport:
        return state.complete(
            [state.Success(claim.id, claim.attempt_id, None, timezone.now())], worker.id
        )

    def complete_and_hold(claim: state.ClaimedJob) -> state.CompletionReport:
        with transaction.atomic():
            report = complete(claim)
            created.set()
            assert go.wait(20)
        return report

    holder, held = in_thread(lambda: complete_and_hold(claims[0]))
    assert created.wait(20)
    rival_thread, rival = in_thread(lambda: complete(claims[1]))
    waits_on_a_lock(rival_thread)
    go.set()
    join(holder, rival_thread)
    assert held.error is None and rival.error is None
    assert [len(held.value.completed), len(rival.value.completed)] == [1, 1]
    assert len(held.value.created) + len(rival.value.created) == 1
    (following,) = pending_runs(str(schedule_id))
    assert following.scheduled_at == slot


@pytest.mark.parametrize("action", ["pause_selected", "resume_selected", "delete_selected"])
def test_an_admin_action_on_a_schedule_whose_run_completes_meanwhile_waits_for_it(
    superuser_client, action
):
    """The admin read each ticked schedule under its own lock before acting, schedule first:
    a completion holding the run, then waiting for the schedule, deadlocked with it."""
    first, worker, success = claimed_run()
    schedule_id = first["schedule_id"]
    ticked: dict[str, Any] = {"index": "0", "_selected_action": [schedule_id]}
    form: dict[str, Any]
    if action == "delete_selected":
        asked = superuser_client.post(
            "/admin/jobs/schedule/", {**ticked, "action": "delete_selected_schedules"}
        )
        form = dict(hidden_fields(asked.content.decode()))  # the confirmation's "Yes"
    else:
        form = {**ticked, "action": action}

    def act() -> None:
        answer = superuser_client.post("/admin/jobs/schedule/", form)
        assert answer.status_code == 302, answer.content[:500]

    race(first["id"], lambda: state.complete([success], worker.id), act)
    assert Job.objects.get(id=first["id"]).status == "completed"
    # A resume leaves the next run the completion made; a pause or delete cancelled it.
    assert len(pending_runs(schedule_id)) == (action == "resume_selected")
