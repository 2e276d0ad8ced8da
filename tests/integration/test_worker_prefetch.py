"""Prefetch: a worker whose threads are all busy holds at most `--prefetch` claimed jobs
that wait for a thread, and claims nothing more, so an idle worker runs the rest."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt

from .conftest import job_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def held_by(worker_id: object) -> set[str]:
    jobs = Job.objects.filter(worker_id=worker_id, status="processing")
    return {str(job_id) for job_id in jobs.values_list("id", flat=True)}


# `echo` runs on a handler thread (`noop` is inline: it never waits for one).
def test_a_busy_worker_holds_at_most_its_prefetch_and_an_idle_one_runs_the_rest(start_worker):
    slow = state.enqueue("sleep", {"seconds": 20}, priority=1)
    before = [state.enqueue("echo", {"value": n}, priority=3) for n in range(6)]
    busy = start_worker("--concurrency", "1", "--prefetch", "2")
    wait_for(lambda: job_status(slow["id"]) == "processing", timeout=60)
    busy_id = busy.row().id
    held = held_by(busy_id)
    # The slow job on its one thread, and at most two claimed with it, waiting for it.
    assert slow["id"] in held and len(held) <= 1 + 2

    idle = start_worker("--concurrency", "1", "--prefetch", "2")
    after = [state.enqueue("echo", {"value": n}, priority=3) for n in range(6)]
    rest = [job["id"] for job in before + after if job["id"] not in held]
    wait_for(lambda: all(job_status(job_id) == "completed" for job_id in rest), timeout=60)

    ran_on = set(JobAttempt.objects.filter(job_id__in=rest).values_list("worker_id", flat=True))
    assert ran_on == {idle.row().id}
    assert held_by(busy_id) == held  # it claimed nothing while its thread was busy


def test_a_worker_never_holds_jobs_of_a_slow_type_waiting_behind_its_busy_thread(start_worker):
    busy = start_worker("--concurrency", "1")  # the default prefetch
    warm_up = state.enqueue("sleep", {"seconds": 0.3})
    wait_for(lambda: job_status(warm_up["id"]) == "completed", timeout=60)
    # Due together, so that one claim meets them all: the long one for the idle thread, and
    # the short ones, of a type that ran 0.3 s here, to wait behind it if it prefetched them.
    due = timezone.now() + timedelta(seconds=1)
    long = state.enqueue("sleep", {"seconds": 20}, priority=1, scheduled_at=due)
    short = [
        state.enqueue("sleep", {"seconds": 0.3}, priority=3, scheduled_at=due) for _ in range(3)
    ]
    wait_for(lambda: job_status(long["id"]) == "processing", timeout=60)
    busy_id = busy.row().id
    assert held_by(busy_id) == {long["id"]}

    idle = start_worker("--concurrency", "1")
    wait_for(lambda: all(job_status(job["id"]) == "completed" for job in short), timeout=15)
    ran_on = set(
        JobAttempt.objects.filter(job_id__in=[job["id"] for job in short]).values_list(
            "worker_id", flat=True
        )
    )
    assert ran_on == {idle.row().id}


def test_jobs_claimed_ahead_at_a_pace_gone_wrong_are_handed_back_for_an_idle_worker(
    start_worker, events
):
    """Jobs of a type that ran fast here turn slow: the worker claimed three to wait behind
    its one thread, at the fast pace. Past the bound (1 s) it hands them back, unstarted and
    with no attempt spent, and a worker with a free thread runs them."""
    # The default prefetch; a quota of the three warm-up jobs and the four slow ones. A wait
    # budget of 0.25 thread-seconds a claim, so that the three fit it at their warm-up pace
    # even if a busy machine stretches those runs to tens of milliseconds.
    busy = start_worker(
        "--concurrency", "1", "--max-jobs", "7", env={"SCHEDULER_PREFETCH_WAIT": "0.5"}
    )
    warm_up = [state.enqueue("sleep", {"seconds": 0}) for _ in range(3)]
    wait_for(lambda: all(job_status(job["id"]) == "completed" for job in warm_up), timeout=60)
    # Due together, so that one claim meets them all.
    due = timezone.now() + timedelta(seconds=1)
    slow = {state.enqueue("sleep", {"seconds": 3}, scheduled_at=due)["id"] for _ in range(4)}
    for job_id in slow:
        events.wait_for("job.started", lambda data, job_id=job_id: data["id"] == job_id, 30)
    handed_back: dict[str, tuple[str, int]] = {}
    for _ in range(3):
        event = events.wait_for(
            "job.retry_scheduled", lambda data: data["id"] in slow - handed_back.keys(), 30
        )
        handed_back[event["data"]["id"]] = (event["data"]["status"], event["data"]["attempt_count"])
    assert list(handed_back.values()) == [("pending", 0)] * 3

    idle = start_worker("--concurrency", "1")
    wait_for(lambda: all(job_status(job_id) == "completed" for job_id in slow), timeout=60)
    # Each ran once: the claims handed back left no attempt behind.
    attempts = JobAttempt.objects.filter(job_id__in=slow)
    assert sorted(attempts.values_list("status", flat=True)) == ["succeeded"] * 4
    assert set(Job.objects.filter(id__in=slow).values_list("attempt_count", flat=True)) == {1}
    ran_on = list(attempts.values_list("worker_id", flat=True))
    assert idle.row().id in ran_on
    # The jobs it handed back are not among the seven its quota counts: it runs on.
    assert busy.popen.poll() is None
