"""Wake-up latency, future jobs, dependencies and recurring series with running workers."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from itertools import pairwise

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt
from worker.wakeup import connection_params

from .conftest import job_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def started_after_created(job_id: str) -> float:
    job = Job.objects.get(id=job_id)
    return (job.started_at - job.created_at).total_seconds()


def test_new_job_on_an_idle_worker_starts_at_once_not_at_the_next_feed(start_worker):
    worker = start_worker(env={"SCHEDULER_FEEDER_INTERVAL": "600"})
    worker.wait_registered()
    warm_up = state.enqueue("noop", {})
    wait_for(lambda: job_status(warm_up["id"]) == "completed", what="warm-up job")

    latencies = []
    for _ in range(50):
        job = state.enqueue("noop", {})
        wait_for(lambda job=job: job_status(job["id"]) == "completed", timeout=5, interval=0.005)
        latencies.append(started_after_created(job["id"]))
        time.sleep(0.01)
    assert statistics.median(latencies) < 0.1, sorted(latencies)


def test_job_scheduled_later_starts_when_due_without_waiting_for_a_feed(start_worker):
    worker = start_worker(env={"SCHEDULER_FEEDER_INTERVAL": "600"})
    worker.wait_registered()
    due = timezone.now() + timedelta(seconds=1.5)
    job = state.enqueue("noop", {}, scheduled_at=due)

    wait_for(lambda: job_status(job["id"]) == "completed", timeout=10)
    started = Job.objects.get(id=job["id"]).started_at
    assert due <= started < due + timedelta(seconds=1)  # a timer, not the 600 s feeder


def test_job_created_before_the_worker_starts_is_fed_at_start(start_worker):
    job = state.enqueue("noop", {}, scheduled_at=timezone.now() + timedelta(seconds=1))
    start_worker(env={"SCHEDULER_FEEDER_INTERVAL": "600"})
    wait_for(lambda: job_status(job["id"]) == "completed", timeout=15)


def test_dependent_starts_only_after_its_upstream_completes_and_promptly(start_worker):
    upstream = state.enqueue("sleep", {"seconds": 0.5})
    middle = state.enqueue("noop", {}, depends_on=upstream["id"])
    last = state.enqueue("echo", {"value": "end"}, depends_on=middle["id"])
    start_worker("--concurrency", "4", env={"SCHEDULER_FEEDER_INTERVAL": "600"})

    wait_for(lambda: job_status(last["id"]) == "completed", timeout=15)
    chain = [Job.objects.get(id=job["id"]) for job in (upstream, middle, last)]
    for before, after in pairwise(chain):
        gap = (after.started_at - before.completed_at).total_seconds()
        assert 0 <= gap < 1.0, gap


def test_cancelling_the_upstream_cancels_the_dependents_and_they_never_run(start_worker):
    upstream = state.enqueue("wait_for_cancel", {"seconds": 20})
    dependent = state.enqueue("noop", {}, depends_on=upstream["id"])
    start_worker()
    wait_for(lambda: job_status(upstream["id"]) == "processing", timeout=15)

    state.cancel(upstream["id"])

    wait_for(lambda: job_status(dependent["id"]) == "cancelled")
    cancelled = Job.objects.get(id=dependent["id"])
    assert upstream["id"] in cancelled.last_error and "cancelled" in cancelled.last_error
    time.sleep(0.5)
    assert not JobAttempt.objects.filter(job_id=dependent["id"]).exists()
    assert job_status(upstream["id"]) == "cancelled"


def test_upstream_in_the_dlq_holds_the_chain_until_it_is_retried(start_worker, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    upstream = state.enqueue("fail_while_file_exists", {"path": str(gate)}, max_retries=1)
    dependent = state.enqueue("echo", {"value": "ran"}, depends_on=upstream["id"])
    start_worker(env={"SCHEDULER_FEEDER_INTERVAL": "600"})

    wait_for(lambda: Job.objects.get(id=upstream["id"]).in_dlq, timeout=15)
    time.sleep(0.5)
    assert job_status(dependent["id"]) == "pending"
    assert not JobAttempt.objects.filter(job_id=dependent["id"]).exists()

    gate.unlink()
    state.retry_from_dlq(upstream["id"])

    wait_for(lambda: job_status(dependent["id"]) == "completed", timeout=10)
    assert Job.objects.get(id=dependent["id"]).result == "ran"
    assert JobAttempt.objects.filter(job_id=upstream["id"]).count() == 2


def test_recurring_job_gets_exactly_one_next_slot_with_two_workers(start_worker):
    series = state.enqueue("noop", {}, recur_interval="every_1_minute", priority=2)
    # Seven minutes late: the next slot must be the first one still ahead, not a catch-up.
    late = timezone.now() - timedelta(minutes=7, seconds=30)
    Job.objects.filter(id=series["id"]).update(scheduled_at=late, run_at=late)
    filler = [state.enqueue("noop", {}) for _ in range(20)]
    first, second = start_worker(), start_worker()

    wait_for(lambda: job_status(series["id"]) == "completed", timeout=15)
    wait_for(lambda: all(job_status(j["id"]) == "completed" for j in filler), timeout=15)
    next_runs = list(Job.objects.filter(previous_run_id=series["id"]))
    assert len(next_runs) == 1
    nxt = next_runs[0]
    assert nxt.status == "pending" and nxt.recur_interval == "every_1_minute"
    assert nxt.scheduled_at == late + timedelta(minutes=8)
    assert nxt.scheduled_at > timezone.now()
    assert (nxt.type, nxt.payload, nxt.priority) == ("noop", {}, 2)
    assert Job.objects.filter(recur_interval="every_1_minute").count() == 2
    assert first.popen.poll() is None and second.popen.poll() is None


def test_cancelling_a_recurring_job_ends_the_series(start_worker):
    series = state.enqueue("wait_for_cancel", {"seconds": 20}, recur_interval="every_1_minute")
    start_worker()
    wait_for(lambda: job_status(series["id"]) == "processing", timeout=15)

    state.cancel(series["id"])

    time.sleep(1.0)
    assert job_status(series["id"]) == "cancelled"
    assert not Job.objects.filter(previous_run_id=series["id"]).exists()


def test_job_skipped_while_another_transaction_held_it_runs_soon_after(start_worker):
    job = state.enqueue("noop", {})
    with psycopg.connect(**connection_params()) as holder:
        holder.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", [job["id"]])
        worker = start_worker(env={"SCHEDULER_FEEDER_INTERVAL": "600"})
        worker.wait_registered()
        time.sleep(0.5)  # the worker has fed and tried to claim it: skipped, locked
        assert job_status(job["id"]) == "pending"
    wait_for(lambda: job_status(job["id"]) == "completed", timeout=5)


def test_the_wake_up_listener_connects_with_database_urls_parameters():
    """The listener's connection is the worker's own, beside Django's: it takes the same
    timeouts and keepalives (a dead link must end in an error there too) and whatever TLS
    or other parameters DATABASE_URL gives, under a name of its own."""
    options = connection.settings_dict["OPTIONS"]
    with psycopg.connect(**connection_params()) as listening:
        shown = listening.info.get_parameters()
        assert listening.execute("SHOW application_name").fetchone() == ("scheduler-worker-listen",)
    for name in ("connect_timeout", "keepalives_idle", "keepalives_count", "tcp_user_timeout"):
        assert str(shown[name]) == str(options[name])
