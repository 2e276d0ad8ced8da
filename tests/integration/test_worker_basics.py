"""`runworker` end to end: registration, claiming, attempts, results, logs, concurrency."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from benchmarks.api_load import named, server_connections
from jobs import state
from jobs.models import AttemptStatus, Job, JobAttempt, JobLog, Worker, WorkerStatus

from .conftest import recorded_runs, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize("scheduler", ["heap", "skiplist"])
def test_once_runs_every_due_job_records_attempts_and_exits(start_worker, scheduler):
    jobs = [state.enqueue("echo", {"value": {"n": n}}, priority=1 + n % 3) for n in range(12)]
    later = state.enqueue("noop", {}, scheduled_at=timezone.now() + timedelta(hours=1))

    worker = start_worker("--once", "--scheduler", scheduler, "--concurrency", "3")
    assert worker.wait() == 0, worker.logs()

    row = Worker.objects.get(pid=worker.pid)
    assert (row.status, row.scheduler, row.concurrency, row.jobs_done) == (
        WorkerStatus.STOPPED,
        scheduler,
        3,
        12,
    )
    assert row.stopped_at is not None and row.heartbeat_at >= row.started_at
    for job in jobs:
        done = Job.objects.get(id=job["id"])
        assert done.status == "completed"
        assert done.result == job["payload"]["value"]
        assert done.worker_id == row.id
        (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
        assert attempt.status == AttemptStatus.SUCCEEDED
        assert attempt.attempt_number == 1
        assert attempt.worker_id == row.id
        assert attempt.finished_at >= attempt.started_at
        assert attempt.duration_ms is not None
    assert Job.objects.get(id=later["id"]).status == "pending"


def test_most_urgent_job_is_run_first(start_worker, runs_table):
    low = state.enqueue("record_run", {}, priority=3)
    high = state.enqueue("record_run", {}, priority=1)
    mid = state.enqueue("record_run", {}, priority=2)

    worker = start_worker("--once", "--concurrency", "1")
    assert worker.wait() == 0, worker.logs()

    # The three may be claimed in one statement (prefetch): the order that counts is the one
    # in which their handlers started, read from the handlers' own clock.
    started = {str(run[0]): run[3] for run in recorded_runs()}
    order = sorted([low["id"], high["id"], mid["id"]], key=started.__getitem__)
    assert order == [high["id"], mid["id"], low["id"]]


def test_failure_records_type_message_and_stack_trace(start_worker):
    job = state.enqueue("flaky", {"failure_probability": 1}, max_retries=1)
    worker = start_worker("--once")
    assert worker.wait() == 0, worker.logs()

    failed = Job.objects.get(id=job["id"])
    assert (failed.status, failed.in_dlq) == ("failed", True)
    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert attempt.status == AttemptStatus.FAILED
    assert attempt.error_type == "HandlerFailure"
    assert "simulated failure" in attempt.error_message
    assert "Traceback" in attempt.stack_trace and "handlers.py" in attempt.stack_trace
    assert failed.last_error == attempt.error_message


def test_what_job_code_returns_raises_or_logs_stays_with_its_own_job(
    start_worker,
):
    # One worker batch: each bad job beside the others and a good one.
    def unstorable(*kinds: str, **options: Any) -> dict[str, Any]:
        return {kind: state.enqueue("unstorable", {"kind": kind}, **options) for kind in kinds}

    results = unstorable("object", "nan", "infinity", "nul", "surrogate", "huge_int", max_retries=1)
    errors = unstorable(
        "error_nul",
        "error_surrogate",
        "error_long_type",
        "error_unreadable",
        "error_interrupting",
        "error_not_text",
        max_retries=1,
    )
    logs = unstorable("log_nul", "log_surrogate", "log_long_level", "log_bad_format")
    hidden = unstorable("hidden", max_retries=1)["hidden"]
    # sys.exit() in job code (a wrapped command-line tool) or a stray KeyboardInterrupt: the
    # worker stops on its signals, never on what a job raises, on a thread or inline.
    leaving = [
        state.enqueue(job_type, {"how": how, **extra}, max_retries=1)
        for job_type in ("leave", "leave_inline")
        for how, extra in (("exit", {"code": 2}), ("exit", {}), ("interrupt", {}))
    ]
    good = state.enqueue("echo", {"value": 7})
    worker = start_worker("--once")
    assert worker.wait() == 0, worker.logs()

    def attempt(job: dict[str, Any]) -> JobAttempt:
        return JobAttempt.objects.get(job_id=job["id"])

    assert Job.objects.get(id=good["id"]).result == 7
    # A result that is not storable JSON fails its attempt, naming the place.
    for kind, job in results.items():
        failed = attempt(job)
        assert (failed.status, failed.error_type) == (AttemptStatus.FAILED, "JsonLimitError"), kind
        assert failed.error_message.startswith("result"), failed.error_message
    # Error messages, stack traces and log lines are kept with NUL and surrogates written
    # out, an exception's long name and a log level's cut to their columns.
    escaped = {"nul": "before \\u0000 after", "surrogate": "before \\ud800 after"}
    for kind in ("nul", "surrogate"):
        failed = attempt(errors[f"error_{kind}"])
        assert (failed.error_type, failed.error_message) == ("RuntimeError", escaped[kind])
        assert escaped[kind] in failed.stack_trace
        assert Job.objects.get(id=failed.job_id).last_error == escaped[kind]
        lines = JobLog.objects.filter(job_id=logs[f"log_{kind}"]["id"])
        assert [line.message for line in lines] == [escaped[kind]]
    # An exception whose message cannot be read fails its attempt all the same, saying so.
    for kind, name, raised in (
        ("unreadable", "Unreadable", "AttributeError"),
        # It ended the completer's thread, and so the worker, every time it ran.
        ("interrupting", "Interrupting", "KeyboardInterrupt"),
        ("not_text", "NotText", "TypeError"),
    ):
        failed = attempt(errors[f"error_{kind}"])
        assert (failed.status, failed.error_type) == (AttemptStatus.FAILED, name)
        assert failed.error_message == f"(its message could not be read: str() raised {raised})"
        assert f"raise {name}()" in failed.stack_trace
        assert Job.objects.get(id=failed.job_id).in_dlq
    long_type = attempt(errors["error_long_type"])
    assert long_type.error_type == ("Refused" * 40)[:200]
    assert long_type.error_message == "a long class name"
    (line,) = JobLog.objects.filter(job_id=logs["log_long_level"]["id"])
    assert (line.level, line.message) == ("IMPORTANT_", "a line at a level of my own")
    # A line whose arguments its format refuses is lost, as Python's logging loses it (the
    # worker's stderr says why); the job and its other lines go on.
    lines = JobLog.objects.filter(job_id=logs["log_bad_format"]["id"]).order_by("id")
    assert [line.message for line in lines] == ["before", "after"]
    assert {Job.objects.get(id=job["id"]).status for job in logs.values()} == {"completed"}
    # A result only the database refuses: the batch is reported again job by job, and that
    # job's attempt fails saying so.
    refused = attempt(hidden)
    assert (refused.status, refused.error_type) == (AttemptStatus.FAILED, "OutcomeNotRecorded")
    assert "its outcome was refused" in refused.error_message
    # What stops a program fails its attempt like any exception.
    recorded = [
        (attempt(job).status, attempt(job).error_type, attempt(job).error_message)
        for job in leaving
    ]
    assert recorded == 2 * [
        (AttemptStatus.FAILED, "SystemExit", "2"),
        (AttemptStatus.FAILED, "SystemExit", "SystemExit"),
        (AttemptStatus.FAILED, "KeyboardInterrupt", "KeyboardInterrupt"),
    ]
    assert {Job.objects.get(id=job["id"]).in_dlq for job in leaving} == {True}


def test_log_lines_of_the_job_logger_land_in_job_logs(start_worker):
    job = state.enqueue("echo", {"log": ["first line", "second line"], "value": 1})
    worker = start_worker("--once")
    assert worker.wait() == 0, worker.logs()

    attempt = JobAttempt.objects.get(job_id=job["id"])
    logs = list(JobLog.objects.filter(job_id=job["id"]).values_list("message", "level", "attempt"))
    assert logs == [("first line", "INFO", attempt.id), ("second line", "INFO", attempt.id)]


def test_a_full_collection_in_a_worker_walks_what_jobs_made_not_the_loaded_application(
    start_worker,
):
    job = state.enqueue("gc_reach", {})
    worker = start_worker("--once")
    assert worker.wait() == 0, worker.logs()

    reach = Job.objects.get(id=job["id"]).result
    # Django, the apps and the worker are most of the process's objects.
    assert reach["frozen"] > 2 * reach["walked"], reach


def test_max_jobs_stops_after_that_many(start_worker):
    for _ in range(5):
        state.enqueue("noop", {})
    worker = start_worker("--max-jobs", "2", "--concurrency", "1")
    assert worker.wait() == 0, worker.logs()
    assert Job.objects.filter(status="completed").count() == 2
    assert Job.objects.filter(status="pending").count() == 3


def test_concurrency_runs_that_many_handlers_at_once_and_no_more(start_worker, runs_table):
    for _ in range(6):
        state.enqueue("record_run", {"sleep_ms": 600})
    worker = start_worker("--once", "--concurrency", "3")
    assert worker.wait() == 0, worker.logs()

    runs = recorded_runs()
    assert len(runs) == 6
    moments = sorted([(r[3], 1) for r in runs] + [(r[4], -1) for r in runs])
    running = peak = 0
    for _, step in moments:
        running += step
        peak = max(peak, running)
    assert peak == 3


def test_running_worker_heartbeats_and_shows_its_current_jobs(start_worker):
    job = state.enqueue("sleep", {"seconds": 3})
    worker = start_worker()
    row = worker.wait_registered()
    first_beat = row.heartbeat_at
    wait_for(lambda: Job.objects.get(id=job["id"]).status == "processing", timeout=15)

    time.sleep(1.0)  # SCHEDULER_HEARTBEAT_INTERVAL is 0.3 s in these tests
    row.refresh_from_db()
    assert row.heartbeat_at > first_beat
    assert row.status == WorkerStatus.RUNNING
    assert list(row.jobs.filter(status="processing").values_list("id", flat=True)) == [
        uuid.UUID(job["id"])
    ]


# README, "Database connections": the loop, the claimer, the completer, the pruner, the
# LISTEN and, for a moment at a time, the stats reader, whatever the worker does (handlers
# that query add their own; these do not).
WORKER_CONNECTIONS = 6


def test_a_worker_draining_holds_no_more_than_its_documented_connections(
    start_worker, subprocess_env
):
    name = f"worker-connections-{uuid.uuid4().hex[:8]}"
    # Handlers that take a moment: the loop claims while others run, so ahead, on the claimer.
    state.enqueue_many(state.JobSpec("sleep", {"seconds": 0.005}) for _ in range(400))
    start_worker(env={"DATABASE_URL": named(subprocess_env["DATABASE_URL"], name)})
    held: list[int] = []

    def drained() -> bool:
        held.append(server_connections(name))
        return not Job.objects.exclude(status="completed").exists()

    wait_for(drained, timeout=60, what="the 400 jobs to complete")
    time.sleep(1.0)  # past the next maintenance turns (heartbeat, fold, prune)
    held.append(server_connections(name))
    # The LISTEN connection names itself (`scheduler-worker-listen`), so it is not counted
    # under the worker's name: the others, claims ahead and completions included, are.
    assert max(held) <= WORKER_CONNECTIONS - 1, held
    assert held[-1] <= WORKER_CONNECTIONS - 1
