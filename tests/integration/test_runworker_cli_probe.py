"""`runworker --max-jobs N` beside lanes (`--queue NAME=N`): the process exits once N jobs
ran in any of them, every lane with it, for the supervisor to start them all afresh."""

from __future__ import annotations

import pytest

from jobs import state
from jobs.models import Job, Worker, WorkerStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_worker_reaching_max_jobs_stops_its_lanes_and_exits(start_worker):
    # Before: the worker ran its job and stopped claiming, then waited for its lane, which
    # waited for a job of its rare queue: a process that neither exited nor served `default`
    # (the second job stayed pending), so no supervisor restarted it.
    jobs = [state.enqueue("noop", {}) for _ in range(2)]
    worker = start_worker("--max-jobs", "1", "--queue", "rare=1", "--concurrency", "1")
    assert worker.wait(timeout=60) == 0, worker.logs()
    statuses = sorted(Job.objects.filter(id__in=[j["id"] for j in jobs]).values_list("status"))
    assert statuses == [("completed",), ("pending",)]
    assert set(Worker.objects.values_list("status", flat=True)) == {WorkerStatus.STOPPED}


def test_a_lane_reaching_max_jobs_stops_its_worker(start_worker):
    # Before: the lane exited once its job ran, and the worker went on alone, nobody
    # serving `rare` (its next job stayed pending) until the worker's own N jobs.
    jobs = [state.enqueue("noop", {}, queue="rare") for _ in range(2)]
    worker = start_worker("--max-jobs", "1", "--queue", "rare=1", "--concurrency", "1")
    assert worker.wait(timeout=60) == 0, worker.logs()
    statuses = sorted(Job.objects.filter(id__in=[j["id"] for j in jobs]).values_list("status"))
    assert statuses == [("completed",), ("pending",)]
    assert set(Worker.objects.values_list("status", flat=True)) == {WorkerStatus.STOPPED}
    assert "the lane for queue rare ended (exit code 0): stopping" in worker.logs()
