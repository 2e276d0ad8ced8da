"""Retention of the workers' rows: one is written per worker process that ever ran, so a
deployment that restarts or autoscales its workers adds rows on every deploy. The pruner
deletes those that stopped, or were declared dead, longer ago than the completed jobs'
retention; never one a job still in processing was claimed by, whose rescue needs it."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from jobs import state
from jobs.models import Worker, WorkerStatus
from jobs.retention import Retention, prune
from tests.attempts import fail_attempt
from tests.integration.conftest import wait_for
from worker.maintenance import Heartbeat, Pruner
from worker.worker import Worker as WorkerLoop

pytestmark = pytest.mark.django_db(transaction=True)

WEEK = Retention(completed=timedelta(days=7), dlq=None)
LONG_AGO = timedelta(days=8)


def worker(hostname: str, status: str = WorkerStatus.RUNNING, *, ago: timedelta) -> Worker:
    """A worker last seen `ago`, and stopped then unless `status` is a live one."""
    then = timezone.now() - ago
    stopped = status in (WorkerStatus.STOPPED, WorkerStatus.DEAD)
    return Worker.objects.create(
        hostname=hostname,
        pid=1,
        status=status,
        started_at=then - timedelta(hours=1),
        heartbeat_at=then,
        stopped_at=then if stopped else None,
    )


def pruned_workers(retention: Retention | None = WEEK) -> int:
    """How many workers one pass of the pruner deleted."""
    pruned = prune(limit=100, continues=False, retention=retention)
    assert pruned is not None
    return pruned.workers


def workers_listed(client: Client) -> str:
    """The admin's list of workers, as an operator reads it."""
    page = client.get("/admin/jobs/worker/")
    assert page.status_code == 200
    return page.content.decode()


def test_workers_stopped_or_dead_longer_ago_than_the_retention_go(superuser_client):
    worker("ancient-stopped-host", WorkerStatus.STOPPED, ago=LONG_AGO)
    worker("ancient-dead-host", WorkerStatus.DEAD, ago=LONG_AGO)
    worker("recent-stopped-host", WorkerStatus.STOPPED, ago=timedelta(days=6))
    worker("live-host", ago=timedelta(seconds=1))

    pruned = pruned_workers()

    page = workers_listed(superuser_client)
    assert "ancient-stopped-host" not in page and "ancient-dead-host" not in page
    assert "recent-stopped-host" in page and "live-host" in page
    assert pruned == 2


def test_a_lost_worker_goes_a_retention_after_the_rescue_declared_it_dead(superuser_client):
    """A worker that stopped beating is declared dead by the rescue, which alone can tell a
    silent worker from a database this one could not see; its retention counts from then."""
    lost = worker("lost-host", ago=LONG_AGO)
    assert pruned_workers() == 0

    state.rescue_lost(stuck_after=timedelta(minutes=10), worker_timeout=timedelta(seconds=30))
    assert Worker.objects.get(id=lost.id).status == WorkerStatus.DEAD
    assert pruned_workers() == 0
    assert "lost-host" in workers_listed(superuser_client)

    Worker.objects.filter(id=lost.id).update(stopped_at=timezone.now() - LONG_AGO)
    assert pruned_workers() == 1
    assert "lost-host" not in workers_listed(superuser_client)


def test_a_worker_a_job_is_still_processing_under_stays_until_that_job_is_taken_back():
    """The rescue finds a dead worker's jobs through its row: a job left processing under a
    dead worker (locked while the rescue passed) must not lose it."""
    held_by = worker("holder", ago=timedelta(0))
    job_id = uuid.UUID(state.enqueue("noop", {})["id"])
    state.claim(held_by.id, 1, [job_id])
    Worker.objects.filter(id=held_by.id).update(
        status=WorkerStatus.DEAD, stopped_at=timezone.now() - LONG_AGO
    )

    assert pruned_workers() == 0
    assert Worker.objects.filter(id=held_by.id).exists()

    (released,) = state.release(held_by.id, "Worker stopped before the job finished.")
    assert released["id"] == str(job_id) and released["status"] == "pending"
    assert pruned_workers() == 1
    assert not Worker.objects.filter(id=held_by.id).exists()


def test_a_worker_its_heartbeat_brings_back_while_the_pruner_deletes_stays():
    """A worker declared dead long ago that beats again (it was cut off, not gone) is
    running again: the pruner that picked it before the heartbeat committed keeps it."""
    back = worker("back-host", WorkerStatus.DEAD, ago=LONG_AGO)
    deleted: list[int] = []

    def pruner() -> None:
        try:
            deleted.append(pruned_workers())
        finally:
            connection.close()

    with transaction.atomic():
        assert Heartbeat(back.id, 5.0).run_once() == {"beats": 1}
        pruning = threading.Thread(target=pruner)
        pruning.start()

        def pruner_waits() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_locks JOIN pg_stat_activity USING (pid)"
                    " WHERE NOT granted AND datname = current_database()"
                )
                (waiting,) = cursor.fetchone()
                return waiting > 0

        wait_for(pruner_waits, what="the pruner waiting for the heartbeat's row")
    pruning.join(timeout=30)

    assert deleted == [0]
    assert Worker.objects.get(id=back.id).status == WorkerStatus.RUNNING


def test_the_attempts_of_a_pruned_worker_still_show(superuser_client, operator_client):
    """A dead letter is kept past the workers' retention: its attempts keep the worker's
    id, and its pages show them without the host."""
    ran_on = worker("gone-host", ago=timedelta(0))
    job_id = uuid.UUID(state.enqueue("noop", {}, max_retries=1)["id"])
    (claimed,) = state.claim(ran_on.id, 1, [job_id])
    fail_attempt(
        job_id,
        claimed.attempt_id,
        error_type="Boom",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(0),
    )
    Worker.objects.filter(id=ran_on.id).update(
        status=WorkerStatus.STOPPED, stopped_at=timezone.now() - LONG_AGO
    )
    assert pruned_workers() == 1

    attempts = operator_client.get(f"/api/v1/jobs/{job_id}/attempts")
    assert attempts.status_code == 200
    assert [a["worker_id"] for a in attempts.json()] == [str(ran_on.id)]
    for page in (f"/dlq/{job_id}", f"/admin/jobs/deadletterjob/{job_id}/change/"):
        answer = superuser_client.get(page)
        assert answer.status_code == 200, page
        assert "Boom" in answer.content.decode()


def test_zero_retention_keeps_stopped_workers_forever(settings):
    settings.SCHEDULER_RETAIN_COMPLETED = 0
    kept = worker("kept", WorkerStatus.STOPPED, ago=timedelta(days=3650))
    assert pruned_workers(None) == 0
    assert Worker.objects.filter(id=kept.id).exists()


def test_many_stopped_workers_go_in_bounded_batches(settings):
    """A fleet restarted on every deploy for a year: a batch at a time, and a full batch
    brings the pruner back at once, as a full batch of jobs does."""
    settings.SCHEDULER_RETAIN_COMPLETED = 7 * 24 * 3600.0
    for n in range(5):
        worker(f"deploy-{n}", WorkerStatus.STOPPED, ago=LONG_AGO + timedelta(minutes=n))
    unit = Pruner(interval=60.0, batch=2)

    unit.run_once()
    assert unit.interval == 0.0
    assert Worker.objects.count() == 3
    # Oldest first.
    assert not Worker.objects.filter(hostname__in=["deploy-4", "deploy-3"]).exists()
    unit.run_once()
    unit.run_once()
    assert unit.interval == 60.0
    assert not Worker.objects.exists()


def test_a_worker_pruned_while_cut_off_shows_again_once_it_beats(superuser_client):
    """Declared dead while cut off from the database for longer than the retention, its row
    was pruned; a heartbeat that finds no row writes it again, so the console, /metrics and
    the rescue see the worker it still is."""
    loop = WorkerLoop(concurrency=2)
    loop._register()
    loop._build_units()
    (heartbeat,) = [timed.unit for timed in loop._units if isinstance(timed.unit, Heartbeat)]
    Worker.objects.filter(id=loop.id).update(
        status=WorkerStatus.DEAD, stopped_at=timezone.now() - LONG_AGO
    )
    assert pruned_workers() == 1
    assert not Worker.objects.filter(id=loop.id).exists()

    heartbeat.run_once()

    row = Worker.objects.get(id=loop.id)
    assert row.status == WorkerStatus.RUNNING and row.stopped_at is None
    assert row.concurrency == 2
    assert str(loop.id) in workers_listed(superuser_client)
