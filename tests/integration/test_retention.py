"""Retention: the pruner deletes finished jobs past their retention with their attempts and
logs, in bounded batches, one pruner at a time; never a dead letter unless told, never a job
that a waiting job depends on; the counters stay exact."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import IdempotencyKey, Job, JobAttempt, JobLog, LastPrune, Worker
from jobs.retention import Retention, prune
from jobs.stats import current_stats
from tests.attempts import fail_attempt
from tests.integration.test_job_counts import true_counts
from worker.maintenance import Pruner

pytestmark = pytest.mark.django_db(transaction=True)

WEEK = Retention(completed=timedelta(days=7), dlq=None)
LONG_AGO = timedelta(days=8)


@pytest.fixture
def worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="pruner-test", pid=1, started_at=now, heartbeat_at=now)


def run(worker: Worker, outcome: str = "complete", **enqueue: Any) -> uuid.UUID:
    """A job taken through a real attempt (one log line) to `outcome`, at once (a cron run's
    slot come now)."""
    job_id = uuid.UUID(state.enqueue("noop", {}, **enqueue)["id"])
    Job.objects.filter(id=job_id).update(run_at=timezone.now())
    (claimed,) = state.claim(worker.id, 1, [job_id])
    state.append_logs(job_id, claimed.attempt_id, [(timezone.now(), "INFO", "ran")])
    if outcome == "complete":
        state.complete([state.Success(job_id, claimed.attempt_id, None, timezone.now())])
    else:
        fail_attempt(
            job_id,
            claimed.attempt_id,
            error_type="Boom",
            error_message="boom",
            stack_trace=None,
            retry_delay=timedelta(0),
        )
    return job_id


def age(*job_ids: uuid.UUID, by: timedelta = LONG_AGO) -> None:
    """Move a job's finishing times into the past, as if it finished `by` ago."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs SET completed_at = completed_at - %(by)s,"
            " cancelled_at = cancelled_at - %(by)s, updated_at = updated_at - %(by)s"
            " WHERE id = ANY(%(ids)s)",
            {"by": by, "ids": list(job_ids)},
        )


def exists(job_id: uuid.UUID) -> bool:
    return Job.objects.filter(id=job_id).exists()


def test_old_completed_and_cancelled_jobs_go_with_their_attempts_and_logs(worker):
    old_done = run(worker)
    old_cancelled = uuid.UUID(
        state.enqueue("noop", {}, scheduled_at=timezone.now() + LONG_AGO)["id"]
    )
    state.cancel(old_cancelled)
    recent_done = run(worker)
    waiting = uuid.UUID(state.enqueue("noop", {}, scheduled_at=timezone.now() + LONG_AGO)["id"])
    age(old_done, old_cancelled, waiting)

    pruned = prune(limit=100, continues=False, retention=WEEK)

    assert pruned is not None
    assert (pruned.jobs, pruned.attempts, pruned.logs, pruned.more) == (2, 1, 1, False)
    assert not exists(old_done) and not exists(old_cancelled)
    assert exists(recent_done) and exists(waiting)
    assert not JobAttempt.objects.filter(job_id=old_done).exists()
    assert not JobLog.objects.filter(job_id=old_done).exists()
    assert JobLog.objects.filter(job_id=recent_done).count() == 1
    assert current_stats() == true_counts()
    assert current_stats()["completed"] == 1


def test_dead_letters_stay_unless_their_own_retention_says_so(worker):
    dead = run(worker, outcome="fail", max_retries=1)
    age(dead)
    assert prune(limit=100, continues=False, retention=WEEK).jobs == 0
    assert exists(dead)

    pruned = prune(limit=100, continues=False, retention=Retention(None, timedelta(days=7)))

    assert (pruned.jobs, pruned.attempts, pruned.logs) == (1, 1, 1)
    assert not exists(dead)
    assert current_stats()["dlq"] == 0 == true_counts()["dlq"]


def test_a_dead_letter_holding_a_series_stays_past_the_dlq_retention(worker):
    """A cron run or a recurring job in the DLQ holds its series until someone retries it:
    pruned by retention alone, the series ended without a trace (the schedule listed no run
    and said nothing, the chain was gone)."""

    def dead_letter(**enqueue: Any) -> uuid.UUID:
        return run(worker, outcome="fail", max_retries=1, **enqueue)

    cron_run = dead_letter(cron="0 3 * * *")
    recurring = dead_letter(recur_interval="every_1_hour")
    paused_run = dead_letter(cron="0 4 * * *")
    schedule = Job.objects.get(id=paused_run).schedule_id
    assert schedule is not None
    state.pause_schedule(schedule)
    one_off = dead_letter()
    age(cron_run, recurring, paused_run, one_off)

    pruned = prune(limit=100, continues=False, retention=Retention(None, timedelta(days=7)))

    assert pruned is not None and pruned.jobs == 2
    assert exists(cron_run) and exists(recurring)
    # A paused schedule's series goes on from its resume, not from its dead letter.
    assert not exists(paused_run) and not exists(one_off)


def test_zero_retention_keeps_finished_jobs_forever(worker, settings):
    settings.SCHEDULER_RETAIN_COMPLETED = 0
    done = run(worker)
    age(done, by=timedelta(days=3650))
    assert prune(limit=100, continues=False).jobs == 0
    assert exists(done)


def test_idempotency_keys_past_their_window_go_and_live_ones_answer(worker):
    """A batch's key stays with none of its jobs (`state._under_key`): the pruner is what
    bounds the keys, once a repeat under them would create anew anyway."""
    specs = [state.JobSpec("noop", {"n": n}) for n in range(2)]
    state.enqueue_many_once("old-batch", specs)
    live, _ = state.enqueue_many_once("live-batch", specs)
    IdempotencyKey.objects.filter(key="old-batch").update(
        created_at=timezone.now() - timedelta(hours=25)
    )

    prune(limit=100, continues=False, retention=WEEK)

    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["live-batch"]
    again, created = state.enqueue_many_once("live-batch", specs)
    assert not created and again == live
    assert Job.objects.count() == 4


def test_a_job_a_waiting_job_depends_on_is_kept_until_that_job_finished(worker):
    upstream = run(worker)
    dependent = uuid.UUID(
        state.enqueue("noop", {}, depends_on=upstream, scheduled_at=timezone.now() + LONG_AGO)["id"]
    )
    age(upstream)

    assert prune(limit=100, continues=False, retention=WEEK).jobs == 0
    assert exists(upstream)
    assert state.get_job(dependent)["depends_on"] == str(upstream)

    state.cancel(dependent)  # the dependent finished: nothing waits on the upstream now
    assert prune(limit=100, continues=False, retention=WEEK).jobs == 1
    assert not exists(upstream) and exists(dependent)


def test_the_next_run_of_a_pruned_recurring_job_keeps_its_place(worker):
    first = run(worker, recur_interval="every_1_hour")
    next_run = Job.objects.get(previous_run_id=first)
    age(first)
    assert prune(limit=100, continues=False, retention=WEEK).jobs == 1
    next_run.refresh_from_db()
    assert next_run.previous_run_id is None and next_run.status == "pending"


def test_a_backlog_goes_in_bounded_batches_and_the_unit_comes_back_at_once(worker, settings):
    settings.SCHEDULER_RETAIN_COMPLETED = 7 * 24 * 3600.0
    jobs = [run(worker) for _ in range(5)]
    age(*jobs)
    unit = Pruner(interval=60.0, batch=2)

    assert unit.run_once() == {"jobs": 2, "attempts": 2, "logs": 2}
    assert unit.interval == 0.0  # a full batch: the worker's next turn prunes again
    assert unit.run_once() == {"jobs": 2, "attempts": 2, "logs": 2}
    assert unit.run_once() == {"jobs": 1, "attempts": 1, "logs": 1}
    assert unit.interval == 60.0  # done: back to its pace
    assert Job.objects.count() == 0
    last = LastPrune.objects.get()
    # The three batches are one pass in the record the console shows.
    assert (last.jobs, last.attempts, last.logs) == (5, 5, 5)
    assert last.started_at <= last.finished_at == last.checked_at

    assert unit.run_once() == {"jobs": 0, "attempts": 0, "logs": 0}
    checked = LastPrune.objects.get()
    assert checked.jobs == 5 and checked.checked_at > last.checked_at


def test_one_pruner_at_a_time(worker):
    done = run(worker)
    age(done)
    database = connection.settings_dict
    with psycopg.connect(
        host=database["HOST"] or "127.0.0.1",
        port=database["PORT"] or 5432,
        user=database["USER"] or "postgres",
        dbname=database["NAME"],
        autocommit=True,
    ) as other_pruner:
        other_pruner.execute("SELECT pg_advisory_lock(hashtext('scheduler_prune'))")
        assert prune(limit=100, continues=False, retention=WEEK) is None
        assert exists(done)
        other_pruner.execute("SELECT pg_advisory_unlock(hashtext('scheduler_prune'))")
    assert prune(limit=100, continues=False, retention=WEEK).jobs == 1


def test_the_dashboard_shows_the_retention_and_the_last_prune(worker, operator, client, settings):
    settings.SCHEDULER_RETAIN_COMPLETED = 7 * 24 * 3600.0
    client.force_login(operator)
    page = client.get("/").content.decode()
    assert "kept for 1\xa0week after they finished" in page
    assert "kept until retried or purged" in page
    assert "nothing pruned yet" in page

    done = run(worker)
    age(done)
    Pruner(interval=60.0, batch=100).run_once()
    page = client.get("/").content.decode()
    assert "1 job, 1 attempt and 1 log line removed" in page
