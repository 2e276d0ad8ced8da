"""Crashes, stopped workers, signals: jobs are never lost and never finished twice."""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from jobs import state
from jobs.models import Job, JobAttempt, JobLog, Worker, WorkerStatus
from worker.worker import Worker as WorkerLoop

from .conftest import job_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def handler_is_running(job_id: str) -> bool:
    """The `wait_for_cancel` handler has started: its first line is in the job's log. A
    job's status says `processing` from its claim, before a thread takes it; a cancel in
    between is one "before it started" (tests/integration/test_worker_attempt_history.py)."""
    return JobLog.objects.filter(job_id=job_id, message="waiting for cancellation").exists()


def attempts_of(job_id: str) -> list[JobAttempt]:
    return list(JobAttempt.objects.filter(job_id=job_id).order_by("attempt_number"))


def test_killed_worker_job_is_rescued_and_finished_by_another(start_worker):
    job = state.enqueue("sleep", {"seconds": 1.5})
    doomed = start_worker()
    wait_for(lambda: job_status(job["id"]) == "processing", timeout=60)
    doomed.send(signal.SIGKILL)
    doomed.wait()

    survivor = start_worker()
    wait_for(lambda: job_status(job["id"]) == "completed", timeout=60)

    first, second = attempts_of(job["id"])
    assert (first.status, first.error_type) == ("failed", "WorkerLost")
    assert first.worker_id == Worker.objects.get(pid=doomed.pid).id
    assert (second.status, second.worker_id) == ("succeeded", survivor.row().id)
    assert Worker.objects.get(pid=doomed.pid).status == WorkerStatus.DEAD


def test_worker_stopped_past_its_timeout_cannot_finish_or_log_into_the_rescued_job(start_worker):
    job = state.enqueue("sleep", {"seconds": 2.5, "lines_after": 2})
    paused = start_worker()
    wait_for(lambda: job_status(job["id"]) == "processing", timeout=60)
    paused.send(signal.SIGSTOP)

    rescuer = start_worker()
    wait_for(lambda: job_status(job["id"]) == "completed", timeout=60)
    paused.send(signal.SIGCONT)
    wait_for(
        lambda: "claim lost" in paused.logs() or "refused" in paused.logs(),
        timeout=10,
        what="the paused worker to notice it lost the job",
    )
    time.sleep(0.5)

    first, second = attempts_of(job["id"])
    assert (first.status, first.error_type) == ("failed", "WorkerLost")
    assert (second.status, second.worker_id) == ("succeeded", rescuer.row().id)
    done = Job.objects.get(id=job["id"])
    assert done.status == "completed" and done.result == {"slept": 2.5, "attempt": 2}
    log_attempts = set(JobLog.objects.filter(job_id=job["id"]).values_list("attempt", flat=True))
    assert log_attempts == {second.id}
    # The paused worker came back: it heartbeats again and keeps working.
    later = state.enqueue("noop", {})
    wait_for(lambda: job_status(later["id"]) == "completed")
    assert paused.popen.poll() is None


# SIGHUP too: closing the ssh session a worker was started from sends it. Before, that killed
# it at once: its job stayed `processing` until the rescue, and then ran a second time.
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_finishes_the_running_job_claims_nothing_more_and_exits_0(
    start_worker, signum
):
    running = state.enqueue("sleep", {"seconds": 1.5}, priority=1)
    waiting = state.enqueue("noop", {}, priority=3)
    # No prefetch: a stopping worker still runs the jobs it had already claimed.
    worker = start_worker("--concurrency", "1", "--prefetch", "0")
    wait_for(lambda: job_status(running["id"]) == "processing", timeout=60)

    worker.send(signum)
    wait_for(lambda: worker.row().status == WorkerStatus.STOPPING, what="stopping status")

    assert worker.wait() == 0, worker.logs()
    assert job_status(running["id"]) == "completed"
    assert job_status(waiting["id"]) == "pending"
    row = worker.row()
    assert row.status == WorkerStatus.STOPPED and row.stopped_at is not None
    logs = worker.logs()
    assert "stopping: no new claims, waiting for 1 running" in logs
    assert "stopped (clean)" in logs


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_second_signal_stops_at_once_and_returns_running_jobs_to_pending(start_worker, signum):
    job = state.enqueue("sleep", {"seconds": 30})
    worker = start_worker()
    wait_for(lambda: job_status(job["id"]) == "processing", timeout=60)

    worker.send(signum)
    wait_for(lambda: worker.row().status == WorkerStatus.STOPPING, what="stopping status")
    stopped_at = time.monotonic()
    worker.send(signum)

    assert worker.wait(timeout=10) == 1, worker.logs()
    assert time.monotonic() - stopped_at < 5
    back = Job.objects.get(id=job["id"])
    assert (back.status, back.worker_id, back.current_attempt_id) == ("pending", None, None)
    (attempt,) = attempts_of(job["id"])
    assert attempt.status == "failed" and attempt.error_type == "WorkerLost"
    assert worker.row().status == WorkerStatus.STOPPED


def test_grace_period_over_returns_the_job_to_pending(start_worker):
    job = state.enqueue("sleep", {"seconds": 30})
    worker = start_worker(env={"SCHEDULER_SHUTDOWN_GRACE": "1"})
    wait_for(lambda: job_status(job["id"]) == "processing", timeout=60)

    worker.send(signal.SIGTERM)

    assert worker.wait(timeout=10) == 1, worker.logs()
    assert job_status(job["id"]) == "pending"


def test_cancel_of_a_running_job_reaches_its_handler_and_frees_the_slot(start_worker):
    cancelled = state.enqueue("wait_for_cancel", {"seconds": 30}, priority=1)
    next_job = state.enqueue("noop", {}, priority=3)
    worker = start_worker("--concurrency", "1")
    wait_for(lambda: handler_is_running(cancelled["id"]), timeout=60)

    state.cancel(cancelled["id"])

    # Well within the 30 s the handler would hold the only slot if the cancel never reached it.
    wait_for(lambda: job_status(next_job["id"]) == "completed", timeout=20)
    wait_for(lambda: "was cancelled while running" in worker.logs(), timeout=20)
    gone = Job.objects.get(id=cancelled["id"])
    assert (gone.status, gone.result) == ("cancelled", None)
    (attempt,) = attempts_of(cancelled["id"])
    assert (attempt.status, attempt.error_type) == ("failed", "Cancelled")


class DeafToCancels(WorkerLoop):
    """A worker whose cancel notifications come too late: its claim watch finds the cancel."""

    def _on_notify(self, payload: str) -> None:
        if '"cancelled"' not in payload:
            super()._on_notify(payload)


def test_a_cancel_found_by_the_claim_watch_is_told_as_the_notified_one(test_handlers, caplog):
    # Which of the two came first, the cancel's notification or the claim watch, was a race:
    # the watch's line said "claim lost (cancelled or rescued)" of a job known cancelled.
    cancelled = state.enqueue("wait_for_cancel", {"seconds": 30})
    worker = DeafToCancels(concurrency=1)
    caplog.set_level(logging.INFO, logger="worker.worker")

    def lines() -> list[str]:
        return [record.getMessage() for record in caplog.records]

    def operator() -> None:
        wait_for(lambda: handler_is_running(cancelled["id"]), timeout=60)
        state.cancel(uuid.UUID(cancelled["id"]))
        try:
            wait_for(lambda: any("cancelled while" in line for line in lines()), timeout=30)
        finally:
            worker.request_stop()
            connection.close()  # this thread's own

    thread = threading.Thread(target=operator)
    thread.start()
    assert worker.run() == 0
    thread.join()

    assert f"job {cancelled['id']} was cancelled while running" in lines()
    assert not [line for line in lines() if "claim lost" in line]
    (attempt,) = attempts_of(cancelled["id"])
    assert (attempt.status, attempt.error_type) == ("failed", "Cancelled")


def test_late_finish_of_a_cancelled_job_cannot_overwrite_it(start_worker):
    job = state.enqueue("sleep", {"seconds": 1.0})
    worker = start_worker()
    wait_for(lambda: job_status(job["id"]) == "processing", timeout=60)

    state.cancel(job["id"])
    time.sleep(2.0)  # the handler ignores the flag and returns after its second

    gone = Job.objects.get(id=job["id"])
    assert (gone.status, gone.result, gone.completed_at) == ("cancelled", None, None)
    assert Worker.objects.get(pid=worker.pid).jobs_done == 0


def test_a_worker_started_before_the_migration_waits_saying_so_and_stops_on_one_signal(
    start_worker,
):
    # A rolling deploy's new worker, up before the release's `migrate` ran.
    latest = MigrationRecorder.Migration.objects.filter(app="jobs").latest("id")
    latest.delete()
    try:
        early = start_worker()
        wait_for(
            lambda: f"lacks 1 migration of this code (jobs.{latest.name})" in early.logs(),
            what="the worker to say what it waits for",
        )
        assert "waiting for `manage.py migrate`" in early.logs()
        assert not Worker.objects.exists()
        # Nothing runs yet: a supervisor's first SIGTERM stops it.
        early.send(signal.SIGTERM)
        assert early.wait() == 0
    finally:
        MigrationRecorder.Migration.objects.create(app="jobs", name=latest.name)


def test_a_handler_running_longer_than_the_stuck_limit_is_not_run_again(start_worker):
    # A handler's timeout (here the default, 300 s) may be longer than SCHEDULER_STUCK_AFTER:
    # before, the worker's own rescuer took its running job back as "worker lost" and ran it
    # again beside the first run, and with no attempt left put it in the DLQ.
    worker = start_worker(env={"SCHEDULER_STUCK_AFTER": "2"})
    job = state.enqueue("sleep", {"seconds": 4}, max_retries=2)
    wait_for(lambda: job_status(job["id"]) in ("completed", "failed"), timeout=60)
    assert [(a.status, a.error_type) for a in attempts_of(job["id"])] == [("succeeded", None)]
    assert "WorkerLost" not in worker.logs()


def test_a_thread_a_handler_left_running_does_not_hold_the_stopped_worker(start_worker):
    # Before, the worker logged "stopped (clean)" and the process then waited for the
    # thread: a supervisor's stop ended in its kill timeout.
    worker = start_worker()
    job = state.enqueue("start_thread", {"seconds": 120})
    wait_for(lambda: job_status(job["id"]) == "completed", timeout=60)
    worker.send(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert "left-behind" in worker.logs()
