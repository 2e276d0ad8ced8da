"""What a worker's own log says about outcomes: operators grep it for a job id, so every
failed attempt, every rescue and every database error in reporting is a line there."""

from __future__ import annotations

import json
import re
import signal
from typing import Any

import pytest

from jobs import state
from jobs.models import Job, JobAttempt, Worker

from .conftest import WorkerProcess, job_status, wait_for
from .test_worker_resilience import cut_the_connection_waiting_on_the_row_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def records(worker: WorkerProcess, logger: str, level: str) -> list[dict[str, Any]]:
    """The worker's JSON log lines of `logger` at `level`."""
    lines = [line for line in worker.logs().splitlines() if line.startswith("{")]
    return [
        entry
        for entry in map(json.loads, lines)
        if entry["logger"] == logger and entry["level"] == level
    ]


def failure_of(worker: WorkerProcess, job: dict[str, Any]) -> dict[str, Any]:
    (line,) = [
        e for e in records(worker, "worker.completer", "WARNING") if e["job_id"] == job["id"]
    ]
    return line


def test_each_failed_attempt_is_logged_with_its_error_and_what_comes_next(start_worker, tmp_path):
    # A message whose first line is longer than a log line quotes, with more lines after it.
    long_line = tmp_path / ("d" * 220) / "end of the first line\nthe second line"
    long_line.parent.mkdir()
    long_line.touch()
    retried = state.enqueue("fail_while_file_exists", {"path": str(long_line)}, max_retries=3)
    timed_out = state.enqueue("short_timeout", {"seconds": 3}, max_retries=1)
    exited = state.enqueue("leave", {"how": "exit", "code": 3}, max_retries=1)

    # `--once` leaves before the retry is due: each job made one attempt.
    worker = start_worker("--once", "--concurrency", "3")
    assert worker.wait() == 0, worker.logs()

    line = failure_of(worker, retried)
    attempt = JobAttempt.objects.get(job_id=retried["id"])
    first_line = f"{long_line.parent}/end of the first line"
    quoted = f"{first_line[:200]}… ({len(first_line) - 200} characters cut)"
    next_retry_at = state.get_job(retried["id"])["next_retry_at"]
    assert line["message"] == (
        f"job {retried['id']} (fail_while_file_exists) attempt 1 of 3 failed: "
        f"RuntimeError: {quoted}; retry at {next_retry_at}"
    )
    assert (line["job_type"], line["attempt_id"], line["attempt_number"]) == (
        "fail_while_file_exists",
        str(attempt.id),
        1,
    )
    assert (line["error_type"], line["retry_at"], line["in_dlq"]) == (
        "RuntimeError",
        next_retry_at,
        False,
    )

    line = failure_of(worker, timed_out)
    assert line["message"] == (
        f"job {timed_out['id']} (short_timeout) attempt 1 of 1 failed: "
        "HandlerTimeout: handler ran over its 0.5 s; no attempt left: in the dead-letter queue"
    )
    assert (line["error_type"], line["retry_at"], line["in_dlq"]) == ("HandlerTimeout", None, True)

    line = failure_of(worker, exited)
    assert line["message"] == (
        f"job {exited['id']} (leave) attempt 1 of 1 failed: "
        "SystemExit: 3; no attempt left: in the dead-letter queue"
    )


def test_a_success_is_no_line_at_info_and_one_at_debug(start_worker):
    quiet = state.enqueue("echo", {"value": 1})
    worker = start_worker("--once")
    assert worker.wait() == 0, worker.logs()
    assert job_status(quiet["id"]) == "completed"
    assert quiet["id"] not in worker.logs()

    told = state.enqueue("echo", {"value": 2})
    worker = start_worker("--once", env={"LOG_LEVEL": "DEBUG"})
    assert worker.wait() == 0, worker.logs()
    (line,) = [e for e in records(worker, "worker.completer", "DEBUG") if "job_id" in e]
    attempt = JobAttempt.objects.get(job_id=told["id"])
    assert line["message"] == f"job {told['id']} (echo) attempt 1 succeeded"
    assert (line["job_id"], line["attempt_id"], line["job_type"], line["attempt_number"]) == (
        told["id"],
        str(attempt.id),
        "echo",
        1,
    )


def test_a_rescue_names_the_lost_worker_and_where_its_jobs_went(start_worker):
    retried = state.enqueue("sleep", {"seconds": 60}, max_retries=3)
    dead_lettered = state.enqueue("sleep", {"seconds": 60}, max_retries=1)
    crashed = start_worker("--concurrency", "2")
    wait_for(
        lambda: {job_status(retried["id"]), job_status(dead_lettered["id"])} == {"processing"},
        timeout=60,
    )
    lost = crashed.row()
    crashed.send(signal.SIGKILL)
    crashed.wait()

    # Its restart is a worker of its own, which takes the jobs back once the crashed one's
    # heartbeat is SCHEDULER_WORKER_TIMEOUT old.
    restarted = start_worker("--concurrency", "2")
    (line,) = wait_for(
        lambda: records(restarted, "worker.maintenance", "WARNING"),
        timeout=60,
        what="the restarted worker to log the rescue",
    )
    assert Job.objects.get(id=dead_lettered["id"]).in_dlq
    assert line["message"] == (
        f"took back 2 jobs of lost worker {lost.id} ({lost.hostname} pid {lost.pid}): "
        f"1 to pending ({retried['id']}), 1 to the dead-letter queue ({dead_lettered['id']})"
    )
    assert line["lost_workers"] == [str(lost.id)]
    assert (line["pending_ids"], line["dlq_ids"]) == ([retried["id"]], [dead_lettered["id"]])
    assert Worker.objects.get(id=lost.id).status == "dead"


def test_a_database_error_in_reporting_is_logged_with_its_message(start_worker):
    worker = start_worker()
    worker.wait_registered()
    job = state.enqueue("sleep", {"seconds": 1})
    wait_for(lambda: job_status(job["id"]) == "processing")

    cut_the_connection_waiting_on_the_row_of(job["id"])  # the completer's report

    wait_for(lambda: job_status(job["id"]) == "completed", timeout=15)
    line, *_ = records(worker, "worker.completer", "ERROR")
    # The server's words ("terminating connection due to administrator command") may reach
    # the client or not before the socket closes; either way its first line is quoted.
    assert re.fullmatch(
        r"database unavailable \(OperationalError: [^\n]+\); reporting 1 outcomes again in .* s",
        line["message"],
    ), line["message"]
