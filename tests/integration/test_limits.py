"""Limits that hold across all workers: three real `runworker` processes share 300 jobs,
and neither a concurrency limit (on a queue) nor a rate limit (on a type) is ever exceeded."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs import queues, state
from jobs.models import Job, JobAttempt

from .conftest import recorded_runs, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RUNNING = 3
STARTS, PERIOD = 20, 1


def most_at_once(intervals: list[tuple]) -> int:
    # A finish and a start at the same instant do not overlap: finishes sort first.
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_three_workers_never_exceed_a_concurrency_or_a_rate_limit(start_worker, runs_table):
    queues.set_limit("queue", "bulk", max_running=RUNNING)
    queues.set_limit("type", "record_rated", max_starts=STARTS, period_seconds=PERIOD)
    state.enqueue_many(
        [state.JobSpec("record_run", {"sleep_ms": 30}, queue="bulk") for _ in range(150)]
        + [state.JobSpec("record_rated", {}) for _ in range(150)]
    )
    for _ in range(3):
        start_worker("--concurrency", "4")
    wait_for(
        lambda: not Job.objects.exclude(status="completed").exists(),
        timeout=180,
        interval=0.5,
        what="all 300 jobs to complete",
    )

    runs = recorded_runs()
    bulk_ids = set(Job.objects.filter(queue="bulk").values_list("id", flat=True))
    bulk = [(started, finished) for job_id, _, _, started, finished in runs if job_id in bulk_ids]
    assert len(bulk) == 150
    # Handlers start after their claim commits and finish before their completion does, so
    # their overlap is at most the claims'.
    assert most_at_once(bulk) <= RUNNING
    assert len({pid for job_id, _, pid, _, _ in runs if job_id in bulk_ids}) > 1

    # Starts as the API shows them (each attempt's started_at, the clock of its claim).
    starts = sorted(
        JobAttempt.objects.filter(job__type="record_rated").values_list("started_at", flat=True)
    )
    assert len(starts) == 150
    for first, last in zip(starts, starts[STARTS:], strict=False):
        assert last - first >= timedelta(seconds=PERIOD)

    # The console's and the API's view of their use once everything ran.
    used = {limit["name"]: limit for limit in queues.limit_usages()}
    assert used["bulk"]["running"] == 0
    assert used["record_rated"]["recent_starts"] <= STARTS
