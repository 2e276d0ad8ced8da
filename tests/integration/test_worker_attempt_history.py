"""What a job's attempts tell an operator when a job is stopped from outside: cancelled
while it waited in a worker for a thread, or cut short by the end of a worker's shutdown
grace, against a worker killed under it. Each handler appends to files (`count_run`), so
whether it started is seen apart from what the attempts say."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt
from tests.handlers_app.handlers import counted_runs

from .conftest import job_status, wait_for
from .test_state import claimed, new_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE_IT_STARTED = "Cancelled before it started"
WHILE_RUNNING = "Cancelled while running"


def attempts_shown(client: Any, job_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/jobs/{job_id}/attempts")
    assert response.status_code == 200, response.content
    return response.json()


def gated_run(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """A `count_run` payload: it says when it starts, then waits for the gate file."""
    return {
        "path": str(tmp_path / "finished"),
        "started_path": str(tmp_path / "started"),
        "gate_path": str(tmp_path / "gate"),
        **extra,
    }


def test_a_job_cancelled_while_it_waits_for_a_thread_says_it_was_cancelled_before_it_started(
    start_worker, operator_client, superuser_client, tmp_path
):
    # One thread; a wait budget (and so a hand-back bound, twice the wait) far longer than
    # the test needs, so the waiting job stays claimed in the worker until it is cancelled.
    worker = start_worker("--concurrency", "1", env={"SCHEDULER_PREFETCH_WAIT": "10"})
    # Runs of the type here give it a pace, without which no job of it is claimed to wait.
    warm_up = [state.enqueue("count_run", {"path": str(tmp_path / "warm")}) for _ in range(3)]
    wait_for(lambda: all(job_status(job["id"]) == "completed" for job in warm_up), timeout=60)
    # Due together, so that one claim takes both: the first for the thread, the other to
    # wait behind it.
    due = timezone.now() + timedelta(seconds=1)
    running = state.enqueue("count_run", gated_run(tmp_path), priority=1, scheduled_at=due)
    payload = {**gated_run(tmp_path), "gate_path": str(tmp_path / "open")}
    (tmp_path / "open").touch()
    waiting = state.enqueue("count_run", payload, priority=3, scheduled_at=due)
    wait_for(lambda: counted_runs(tmp_path / "started")[running["id"]] == 1, timeout=60)
    held = Job.objects.get(id=waiting["id"])
    assert (held.status, held.worker_id) == ("processing", worker.row().id)

    response = operator_client.post(f"/api/v1/jobs/{waiting['id']}/cancel")

    assert response.status_code == 200, response.content
    wait_for(
        lambda: (
            attempts_shown(operator_client, waiting["id"])[0]["error_message"] == BEFORE_IT_STARTED
        ),
        timeout=10,
        what="the attempt to say it never started",
    )
    (attempt,) = attempts_shown(operator_client, waiting["id"])
    assert (attempt["status"], attempt["error_type"]) == ("failed", "Cancelled")
    page = superuser_client.get(reverse("console:job-detail", args=[waiting["id"]]))
    assert BEFORE_IT_STARTED in page.content.decode()
    assert WHILE_RUNNING not in page.content.decode()
    assert f"job {waiting['id']} was cancelled before it started" in worker.logs()
    # And it never did: the running job finishes, and the cancelled one was never started.
    (tmp_path / "gate").touch()
    wait_for(lambda: job_status(running["id"]) == "completed", timeout=30)
    assert waiting["id"] not in counted_runs(tmp_path / "started")
    assert job_status(waiting["id"]) == "cancelled"


def test_only_an_attempt_a_cancel_closed_is_said_to_have_never_started():
    """What a worker presents of claims it lost while their jobs waited for a thread: the
    attempt a cancel closed is corrected; a released one, or one still running, stays."""
    worker, stopped = new_worker(), new_worker()
    cancelled = claimed(worker, state.enqueue("noop", {"n": 1}))
    running = claimed(worker, state.enqueue("noop", {"n": 2}))
    released = claimed(stopped, state.enqueue("noop", {"n": 3}))
    state.cancel(cancelled.id)
    state.release(stopped.id, "Worker stopped before the job finished.")
    # A hand-back the cancel beat is refused; its claim is among those presented.
    refused = state.hand_back([(cancelled.id, cancelled.attempt_id)]).refused
    assert refused == [(cancelled.id, cancelled.attempt_id)]

    noted = state.note_unstarted(
        [*refused, (released.id, released.attempt_id), (running.id, running.attempt_id)]
    )

    assert noted == 1
    claims = (cancelled, released, running)
    said = {
        a.id: (a.status, a.error_type, a.error_message)
        for a in JobAttempt.objects.filter(id__in=[c.attempt_id for c in claims])
    }
    assert said == {
        cancelled.attempt_id: ("failed", "Cancelled", BEFORE_IT_STARTED),
        released.attempt_id: ("failed", "WorkerLost", "Worker stopped before the job finished."),
        running.attempt_id: ("running", None, None),
    }


def test_a_running_job_cancelled_still_says_it_was_cancelled_while_running(
    start_worker, operator_client, tmp_path
):
    worker = start_worker("--concurrency", "1")
    job = state.enqueue("count_run", gated_run(tmp_path))
    wait_for(lambda: counted_runs(tmp_path / "started")[job["id"]] == 1, timeout=60)

    assert operator_client.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 200

    wait_for(lambda: f"job {job['id']} was cancelled while running" in worker.logs(), timeout=10)
    (attempt,) = attempts_shown(operator_client, job["id"])
    assert (attempt["error_type"], attempt["error_message"]) == ("Cancelled", WHILE_RUNNING)
    (tmp_path / "gate").touch()


def test_a_job_cut_short_by_the_end_of_the_shutdown_grace_spends_none_of_its_attempts(
    start_worker, operator_client, tmp_path
):
    """Two attempts. The first is cut short by a stop whose grace ran out, which is no fault of
    the job's; the run after it fails (its output path is a directory). That failure is its
    first, so the job waits for its retry rather than entering the dead-letter queue."""
    (tmp_path / "finished").mkdir()
    job = state.enqueue("count_run", gated_run(tmp_path), max_retries=2)
    stopping = start_worker(env={"SCHEDULER_SHUTDOWN_GRACE": "1"})
    wait_for(lambda: counted_runs(tmp_path / "started")[job["id"]] == 1, timeout=60)

    stopping.send(signal.SIGTERM)

    assert stopping.wait(timeout=30) == 1, stopping.logs()
    released = operator_client.get(f"/api/v1/jobs/{job['id']}").json()
    assert (released["status"], released["attempt_count"]) == ("pending", 0)
    (cut_short,) = attempts_shown(operator_client, job["id"])
    assert (cut_short["status"], cut_short["error_type"]) == ("failed", "WorkerLost")

    (tmp_path / "gate").touch()
    # One job, then it exits: the retry, about a second later, is left waiting.
    rerun = start_worker("--max-jobs", "1")
    assert rerun.wait(timeout=60) == 0, rerun.logs()
    failed = operator_client.get(f"/api/v1/jobs/{job['id']}").json()
    assert (failed["status"], failed["in_dlq"], failed["attempt_count"]) == ("failed", False, 1)
    assert failed["max_retries"] == 2
    assert failed["next_retry_at"] is not None
    cut_short, run_after = attempts_shown(operator_client, job["id"])
    assert cut_short["error_type"] == "WorkerLost"
    assert (run_after["status"], run_after["error_type"]) == ("failed", "IsADirectoryError")


def test_a_job_whose_worker_is_killed_under_it_spends_that_attempt(start_worker, tmp_path):
    """A crash may be the job's own doing (memory, a native library): its attempt counts, and
    a job with none left enters the dead-letter queue rather than kill worker after worker."""
    job = state.enqueue("count_run", gated_run(tmp_path), max_retries=1)
    doomed = start_worker()
    wait_for(lambda: counted_runs(tmp_path / "started")[job["id"]] == 1, timeout=60)

    doomed.send(signal.SIGKILL)
    doomed.wait()
    start_worker()

    wait_for(lambda: Job.objects.get(id=job["id"]).in_dlq, timeout=60, what="the rescue")
    dead = Job.objects.get(id=job["id"])
    assert (dead.status, dead.attempt_count) == ("failed", 1)
    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert (attempt.status, attempt.error_type) == ("failed", "WorkerLost")
