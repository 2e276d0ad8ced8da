"""Redis away, database connections cut: the worker keeps running jobs or recovers."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from jobs import state
from jobs.models import Job, JobAttempt, JobLog
from scheduler_project.devservices.processes import free_port

from .conftest import job_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_jobs_still_run_while_redis_is_unreachable(start_worker):
    jobs = [state.enqueue("echo", {"value": n}) for n in range(5)]
    worker = start_worker("--once", env={"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    assert worker.wait() == 0, worker.logs()
    assert all(job_status(job["id"]) == "completed" for job in jobs)
    assert "event publish failed" in worker.logs()


def test_worker_survives_losing_its_database_connections(start_worker):
    worker = start_worker()
    worker.wait_registered()
    before = state.enqueue("noop", {})
    wait_for(lambda: job_status(before["id"]) == "completed")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        (terminated,) = cursor.fetchone()
    assert terminated >= 2  # the loop's connection and the listener's

    after = state.enqueue("echo", {"value": "after"})
    wait_for(lambda: job_status(after["id"]) == "completed", timeout=15)
    assert JobAttempt.objects.filter(job_id=after["id"]).count() == 1
    assert worker.popen.poll() is None
    logs = worker.logs()
    assert "database unavailable" in logs or "listener lost its connection" in logs, logs


def test_a_handler_thread_keeps_its_connection_between_jobs_and_recovers_when_it_is_cut(
    start_worker,
):
    worker = start_worker("--concurrency", "2")
    worker.wait_registered()
    first = [state.enqueue("backend_pid", {}) for _ in range(20)]
    wait_for(lambda: all(job_status(job["id"]) == "completed" for job in first), timeout=30)
    backends = {row.result["backend"] for row in Job.objects.filter(type="backend_pid")}
    assert len(backends) <= 2  # one per handler thread, not one per job

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM unnest(%s) AS pid", [list(backends)]
        )
    second = [state.enqueue("backend_pid", {}) for _ in range(4)]
    wait_for(lambda: all(job_status(job["id"]) == "completed" for job in second), timeout=30)
    later = {Job.objects.get(id=job["id"]).result["backend"] for job in second}
    assert not later & backends
    # A dead kept connection is noticed before the handler's first query: no attempt failed.
    assert JobAttempt.objects.filter(job_id__in=[job["id"] for job in second]).count() == 4
    assert worker.popen.poll() is None


@pytest.mark.parametrize("kind", ["open_transaction", "open_transaction_inline"])
def test_a_handler_that_leaves_a_transaction_open_fails_alone_and_the_next_jobs_run(
    start_worker, kind
):
    # Before, the thread's connection stayed marked inside the transaction: every later job
    # that queried on that thread failed with "the connection is closed", and an inline
    # handler's took the worker's own connection.
    worker = start_worker("--concurrency", "1")
    worker.wait_registered()
    left_open = state.enqueue(kind, {}, max_retries=1)
    after = [state.enqueue("backend_pid", {}) for _ in range(2)] + [state.enqueue("noop", {})]
    wait_for(lambda: all(job_status(job["id"]) == "completed" for job in after), timeout=30)
    (attempt,) = JobAttempt.objects.filter(job_id=left_open["id"])
    assert (attempt.status, attempt.error_type) == ("failed", "TransactionLeftOpen")
    assert "rolled back" in attempt.error_message
    assert worker.popen.poll() is None


def test_log_lines_of_an_outcome_survive_an_exchange_cut_short(start_worker):
    worker = start_worker()
    worker.wait_registered()
    job = state.enqueue("sleep", {"seconds": 1, "lines_after": 2})
    wait_for(lambda: job_status(job["id"]) == "processing")

    # The worker's exchange writes the attempt's log lines and completes the job in one
    # transaction.
    cut_the_connection_waiting_on_the_row_of(job["id"])

    wait_for(lambda: job_status(job["id"]) == "completed", timeout=15)
    messages = JobLog.objects.filter(job_id=job["id"]).values_list("message", flat=True)
    assert sorted(messages) == ["late line 0 of attempt 1", "late line 1 of attempt 1"]
    assert "database unavailable" in worker.logs()


def cut_the_connection_waiting_on_the_row_of(job_id: str) -> None:
    """Hold the job's row until a statement waits on it, then cut that statement's connection:
    a database lost in the middle of the worker's exchange."""
    with psycopg.connect(**connection.get_connection_params()) as holder:
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", [job_id])
        waiting = wait_for(lambda: backends_waiting_on_a_lock(holder), what="a statement to wait")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s) AS pid", [waiting])
        holder.rollback()


def backends_waiting_on_a_lock(holder: psycopg.Connection) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> %s",
            [holder.info.backend_pid],
        )
        return [row[0] for row in cursor.fetchall()]
