"""Retries wait their jittered backoff for real, then the job enters the DLQ; timeouts fail."""

from __future__ import annotations

from itertools import pairwise

import pytest

from jobs import state
from jobs.explain import explain
from jobs.models import Job, JobAttempt
from tests.unit.test_backoff import delay_bounds

from .conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Between a retry falling due and its claim: the wake-up timer, one claim round trip, and a
# busy shared machine.
SLACK_SECONDS = 0.5


def test_always_failing_job_waits_its_backoff_band_each_time_then_enters_the_dlq(
    start_worker, events
):
    job = state.enqueue("flaky", {"failure_probability": 1}, max_retries=3)
    worker = start_worker()

    dlq = events.wait_for("job.dlq_entry", lambda data: data["id"] == job["id"], timeout=20)
    assert dlq["data"]["in_dlq"] is True and dlq["data"]["attempt_count"] == 3

    attempts = list(JobAttempt.objects.filter(job_id=job["id"]).order_by("attempt_number"))
    assert [a.attempt_number for a in attempts] == [1, 2, 3]
    assert all(a.status == "failed" and a.error_type == "HandlerFailure" for a in attempts)
    for earlier, later in pairwise(attempts):
        waited = (later.started_at - earlier.finished_at).total_seconds()
        low, high = delay_bounds(earlier.attempt_number)
        assert low <= waited <= high + SLACK_SECONDS, (earlier.attempt_number, waited)

    retries = [e for e in events.received if e["type"] == "job.retry_scheduled"]
    assert [e["data"]["attempt_count"] for e in retries] == [1, 2]
    assert all(e["data"]["next_retry_at"] for e in retries)
    stored = Job.objects.get(id=job["id"])
    assert (stored.status, stored.in_dlq, stored.next_retry_at) == ("failed", True, None)
    assert worker.popen.poll() is None, "the worker keeps running after a DLQ entry"


def test_handler_over_its_timeout_fails_the_attempt_with_a_timeout_error(start_worker):
    job = state.enqueue("short_timeout", {"seconds": 5}, max_retries=1)
    worker = start_worker()

    wait_for(lambda: Job.objects.get(id=job["id"]).in_dlq, timeout=15, what="timeout failure")
    attempt = JobAttempt.objects.get(job_id=job["id"])
    assert attempt.error_type == "HandlerTimeout"
    assert "0.5 s" in attempt.error_message
    # Failed at the timeout, not when the handler finally returned.
    assert attempt.duration_ms < 2000
    assert worker.popen.poll() is None


def test_a_worker_without_a_types_handler_leaves_its_jobs_to_a_worker_that_has_it(
    start_worker, test_handlers
):
    # A rolling deploy: the job was created where `echo` exists; this worker's code lacks it.
    orphan = state.enqueue("echo", {"value": 1}, max_retries=1)
    known = state.enqueue("noop", {})
    older = start_worker(env={"SCHEDULER_EXTRA_APPS": ""})

    wait_for(lambda: Job.objects.get(id=known["id"]).status == "completed", what="noop")
    # Its heartbeat records the type, and the job says why it waits.
    wait_for(lambda: explain(orphan["id"])["reason"] == "no_handler", what="no_handler")
    stored = Job.objects.get(id=orphan["id"])
    assert (stored.status, stored.attempt_count, stored.in_dlq) == ("pending", 0, False)
    assert not JobAttempt.objects.filter(job_id=orphan["id"]).exists()
    assert "no handler for job type 'echo'" in older.logs()

    newer = start_worker("--once")
    assert newer.wait() == 0, newer.logs()
    assert Job.objects.get(id=orphan["id"]).status == "completed"
    assert older.popen.poll() is None
