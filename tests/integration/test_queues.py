"""Queues with real `runworker` processes: a worker serves only its queues, a queue given
its own slots runs in a process of its own, and a pause holds on every worker from its
commit on and survives a worker's restart."""

from __future__ import annotations

import os
import signal

import pytest

from jobs import queues, state
from jobs.models import Job, Worker, WorkerStatus

from .conftest import recorded_runs, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def statuses(jobs: list[dict]) -> set[str]:
    return set(Job.objects.filter(id__in=[j["id"] for j in jobs]).values_list("status", flat=True))


def done(jobs: list[dict]) -> bool:
    return statuses(jobs) == {"completed"}


def test_a_worker_serves_its_queues_and_a_queue_with_slots_of_its_own_runs_apart(
    start_worker, runs_table
):
    emails = [state.enqueue("record_run", {"sleep_ms": 200}, queue="emails") for _ in range(4)]
    reports = [state.enqueue("record_run", {}, queue="reports") for _ in range(2)]
    other = state.enqueue("record_run", {}, queue="other")

    worker = start_worker("--queues", "reports", "--queue", "emails=2", "--concurrency", "1")
    wait_for(lambda: done(emails + reports), timeout=30, what="emails and reports to run")

    runs = {str(row[0]): row for row in recorded_runs()}
    email_pids = {runs[job["id"]][2] for job in emails}
    report_pids = {runs[job["id"]][2] for job in reports}
    assert len(email_pids) == 1 and len(report_pids) == 1 and email_pids != report_pids
    lane = Worker.objects.get(pid=email_pids.pop())
    assert lane.concurrency == 2
    # Each records the queues it serves (what an explanation of a waiting job reads).
    main = Worker.objects.get(pid=report_pids.pop())
    assert (main.queues, main.other_queues) == (["reports"], ["emails"])
    assert (lane.queues, lane.other_queues) == (["emails"], [])
    # Two slots: at most two emails ran at once.
    for job in emails:
        start = runs[job["id"]][3]
        running = [r for r in (runs[j["id"]] for j in emails) if r[3] <= start < r[4]]
        assert len(running) <= 2
    assert Job.objects.get(id=other["id"]).status == "pending"

    # One signal to the worker stops its lane too.
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0, worker.logs()
    wait_for(
        lambda: Worker.objects.get(id=lane.id).status == WorkerStatus.STOPPED,
        what="the lane to stop",
    )


def test_a_lane_takes_its_workers_prefetch(start_worker):
    # Lanes ran with the default prefetch whatever the worker was given: `--prefetch 0`
    # (claims only for free threads, so that a pause is exact) held on the main worker
    # only, and a lane of one slot held a hundred claimed jobs past a pause.
    worker = start_worker("--queue", "emails=1", "--concurrency", "1", "--prefetch", "0")

    def started() -> list[str]:
        lines = [line for line in worker.logs().splitlines() if " started: " in line]
        return lines if len(lines) == 2 else []

    lines = wait_for(started, timeout=30, what="the worker and its lane to start")
    assert all("prefetch=0 " in line for line in lines), lines


def test_a_lane_that_dies_stops_its_worker_for_the_supervisor_to_restart_both(start_worker):
    # The supervisor watches the worker, not its lanes: a lane killed (the OOM killer, a
    # crash) left its queue unserved, silently, for as long as the worker ran on.
    worker = start_worker("--queue", "emails=1", "--concurrency", "1")
    main = worker.wait_registered()
    lane = wait_for(
        lambda: Worker.objects.filter(queues=["emails"], status=WorkerStatus.RUNNING).first(),
        what="the lane to register",
    )
    os.kill(lane.pid, signal.SIGKILL)
    assert worker.wait() != 0, worker.logs()
    assert "lane for queue emails ended" in worker.logs()
    assert Worker.objects.get(id=main.id).status == WorkerStatus.STOPPED


@pytest.mark.parametrize("first", ["lane", "worker"])
def test_a_platform_stopping_every_process_lets_a_lanes_running_job_finish(
    start_worker, runs_table, first
):
    # A platform stopping a dyno sends SIGTERM to each of its processes: the lane got one
    # itself and one passed on by its worker, took the second for "stop now" and handed
    # back the job it had time to finish. Its own comes first, or its worker's does.
    worker = start_worker("--queue", "emails=1", "--concurrency", "1")
    worker.wait_registered()
    lane = wait_for(
        lambda: Worker.objects.filter(queues=["emails"], status=WorkerStatus.RUNNING).first(),
        what="the lane to register",
    )
    job = state.enqueue("record_run", {"sleep_ms": 1500}, queue="emails")
    wait_for(lambda: statuses([job]) == {"processing"}, what="the lane to start the job")

    if first == "lane":
        os.kill(lane.pid, signal.SIGTERM)
        worker.send(signal.SIGTERM)
    else:
        worker.send(signal.SIGTERM)
        wait_for(
            lambda: Worker.objects.get(id=lane.id).status == WorkerStatus.STOPPING,
            what="the lane to stop claiming",
        )
        os.kill(lane.pid, signal.SIGTERM)
    assert worker.wait() == 0, worker.logs()
    assert statuses([job]) == {"completed"}
    assert Worker.objects.get(id=lane.id).status == WorkerStatus.STOPPED


def test_a_pause_holds_on_every_worker_and_outlives_a_restart(start_worker, runs_table):
    queues.pause("emails")
    held = [state.enqueue("record_run", {}, queue="emails") for _ in range(3)]
    free = [state.enqueue("record_run", {}) for _ in range(3)]
    first = start_worker("--concurrency", "2")
    second = start_worker("--concurrency", "2")
    first.wait_registered()
    second.wait_registered()
    wait_for(lambda: done(free), timeout=30, what="the default queue to run")
    # Both workers fed and claimed since the pause committed: the held jobs were skipped.
    assert statuses(held) == {"pending"}

    first.send(signal.SIGTERM)
    assert first.wait() == 0
    restarted = start_worker("--concurrency", "2")
    restarted.wait_registered()
    more = [state.enqueue("record_run", {}) for _ in range(2)]
    wait_for(lambda: done(more), timeout=30, what="new default jobs to run")
    assert statuses(held) == {"pending"}

    queues.resume("emails")
    wait_for(lambda: done(held), timeout=30, what="the resumed queue to run")
    ran_on = {row[2] for row in recorded_runs() if str(row[0]) in {j["id"] for j in held}}
    assert ran_on <= {second.pid, restarted.pid}
