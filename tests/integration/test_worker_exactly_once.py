"""Several worker processes over one queue: every job runs, and runs once."""

from __future__ import annotations

import pytest

from jobs import state
from jobs.models import Job, JobAttempt

from .conftest import recorded_runs, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

JOBS = 3000


@pytest.mark.timeout(240)
def test_three_workers_run_each_of_3000_jobs_exactly_once(start_worker, runs_table):
    workers = [
        start_worker("--scheduler", scheduler, "--concurrency", "4")
        for scheduler in ("heap", "skiplist", "heap")
    ]
    for worker in workers:
        worker.wait_registered()

    state.enqueue_many(state.JobSpec("record_run", {}) for _ in range(JOBS))

    wait_for(
        lambda: Job.objects.filter(status="completed").count() == JOBS,
        timeout=180,
        interval=0.5,
        what="every job to complete",
    )
    runs = recorded_runs()
    assert len(runs) == JOBS
    assert len({run[0] for run in runs}) == JOBS, "a job ran twice"
    assert {run[2] for run in runs} == {w.pid for w in workers}, "all three took part"
    assert JobAttempt.objects.count() == JOBS
    assert not JobAttempt.objects.exclude(status="succeeded").exists()
    assert not Job.objects.exclude(status="completed").exists()
    assert sum(w.row().jobs_done for w in workers) == JOBS
