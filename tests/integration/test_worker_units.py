"""The worker's pieces one by one: the SQL-built job object, and each maintenance unit's
`run_once()` against the real database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import Job, Worker, WorkerStatus
from worker.maintenance import ClaimWatch, Feeder, Heartbeat, Rescuer, runnable_jobs
from worker.schedulers import ScheduledJob

pytestmark = pytest.mark.django_db(transaction=True)


def make_worker(**fields) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        **{"hostname": "test", "pid": 1, "started_at": now, "heartbeat_at": now, **fields}
    )


def success(claimed: state.ClaimedJob, result=None) -> state.Success:
    return state.Success(claimed.id, claimed.attempt_id, result, timezone.now())


def test_every_transition_and_read_returns_the_same_job_object(test_handlers):
    worker = make_worker()
    upstream = state.enqueue("noop", {})
    edge = datetime(2026, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC)  # milliseconds are cut, not rounded
    Job.objects.filter(id=upstream["id"]).update(created_at=edge, scheduled_at=edge, run_at=edge)
    recurring = state.enqueue(
        "echo", {"value": [1, "two"]}, priority=3, recur_interval="every_5_minutes"
    )
    assert list(recurring) == [
        "id", "type", "payload", "priority", "status", "attempt_count", "max_retries",
        "scheduled_at", "recur_interval", "depends_on", "in_dlq", "created_at", "updated_at",
        "started_at", "completed_at", "cancelled_at", "next_retry_at", "last_error", "result",
        "worker_id", "schedule_id", "upstream_ids", "queue",
    ]  # fmt: skip
    assert (recurring["payload"], recurring["priority"], recurring["status"]) == (
        {"value": [1, "two"]},
        3,
        "pending",
    )

    claimed = state.claim(worker.id, 10)
    assert {c.job["id"] for c in claimed} == {upstream["id"], recurring["id"]}
    for c in claimed:
        assert c.job == state.get_job(c.id)
        assert (c.type, c.priority, c.attempt_number) == (c.job["type"], c.job["priority"], 1)
        assert (c.job["status"], c.job["worker_id"]) == ("processing", str(worker.id))
    assert state.get_job(upstream["id"])["created_at"] == "2026-01-02T03:04:05.999Z"

    dependent = state.enqueue("noop", {}, depends_on=uuid.UUID(upstream["id"]))
    assert dependent["depends_on"] == upstream["id"]
    report = state.complete([success(c, {"n": 1}) for c in claimed], worker.id)
    assert len(report.completed) == 2 and len(report.created) == 1
    for job in report.completed + report.created:
        assert job == state.get_job(job["id"])
    assert {j["result"]["n"] for j in report.completed} == {1}
    assert report.released == [uuid.UUID(dependent["id"])]

    (claimed_dependent,) = state.claim(worker.id, 10, [uuid.UUID(dependent["id"])])
    assert claimed_dependent.job["depends_on"] == upstream["id"]
    assert claimed_dependent.job == state.get_job(dependent["id"])


def test_feeder_loads_due_jobs_and_those_within_its_lookahead_only():
    due = state.enqueue("noop", {})
    soon = state.enqueue("noop", {}, scheduled_at=timezone.now() + timedelta(seconds=20))
    state.enqueue("noop", {}, scheduled_at=timezone.now() + timedelta(hours=1))
    blocked = state.enqueue("noop", {}, depends_on=uuid.UUID(due["id"]))
    seen: list[ScheduledJob] = []

    def sink(entries: list[ScheduledJob]) -> int:
        seen.extend(entries)
        return len(entries)

    feeder = Feeder(sink, interval=30, lookahead=timedelta(seconds=45), limit=100)
    assert feeder.run_once() == {"seen": 2, "new": 2}
    assert [str(e.job_id) for e in seen] == [due["id"], soon["id"]]
    assert str(seen[0].job_id) != blocked["id"]
    assert feeder.truncated is False

    small = Feeder(sink, interval=30, lookahead=timedelta(0), limit=1)
    assert small.run_once()["seen"] == 1 and small.truncated is True


def test_heartbeat_beats_and_brings_back_a_worker_declared_dead():
    long_ago = timezone.now() - timedelta(minutes=5)
    worker = make_worker(heartbeat_at=long_ago, status=WorkerStatus.DEAD, stopped_at=long_ago)

    assert Heartbeat(worker.id, interval=5).run_once() == {"beats": 1}

    worker.refresh_from_db()
    assert worker.status == WorkerStatus.RUNNING and worker.stopped_at is None
    assert worker.heartbeat_at > long_ago


def test_rescuer_declares_silent_workers_dead_and_returns_their_jobs():
    silent = make_worker(heartbeat_at=timezone.now() - timedelta(seconds=40))
    alive = make_worker()
    lost = state.enqueue("noop", {})
    kept = state.enqueue("noop", {})
    state.claim(silent.id, 1, [uuid.UUID(lost["id"])])
    state.claim(alive.id, 1, [uuid.UUID(kept["id"])])
    offered: list[ScheduledJob] = []

    rescuer = Rescuer(
        lambda entries: offered.extend(entries) or len(entries),
        interval=10,
        stuck_after=timedelta(minutes=10),
        worker_timeout=timedelta(seconds=30),
        watched_since=lambda: timezone.now() - timedelta(minutes=1),
    )
    assert rescuer.run_once() == {"rescued": 1, "new": 1}

    assert [str(e.job_id) for e in offered] == [lost["id"]]
    assert Job.objects.get(id=lost["id"]).status == "pending"
    assert Job.objects.get(id=kept["id"]).status == "processing"
    assert Worker.objects.get(id=silent.id).status == WorkerStatus.DEAD
    assert Worker.objects.get(id=alive.id).status == WorkerStatus.RUNNING
    assert rescuer.run_once() == {"rescued": 0, "new": 0}


def test_rescuer_counts_silence_only_since_it_regained_the_database():
    # Both workers went silent 40 s ago, as in an outage for everyone that just ended.
    silent = make_worker(heartbeat_at=timezone.now() - timedelta(seconds=40))
    job = state.enqueue("noop", {})
    state.claim(silent.id, 1, [uuid.UUID(job["id"])])
    regained = timezone.now() - timedelta(seconds=20)

    rescuer = Rescuer(
        lambda entries: len(entries),
        interval=10,
        stuck_after=timedelta(minutes=10),
        worker_timeout=timedelta(seconds=30),
        watched_since=lambda: regained,
    )
    # Seen silent for 20 s only: it may be on its way back with finished outcomes.
    assert rescuer.run_once() == {"rescued": 0, "new": 0}
    assert Worker.objects.get(id=silent.id).status == WorkerStatus.RUNNING

    # Silent for the whole timeout while this worker could see the database: dead.
    regained -= timedelta(seconds=15)
    assert rescuer.run_once() == {"rescued": 1, "new": 1}
    assert Worker.objects.get(id=silent.id).status == WorkerStatus.DEAD
    assert Job.objects.get(id=job["id"]).status == "pending"


def test_claim_watch_reports_attempts_whose_claim_is_gone():
    worker = make_worker()
    first, second = state.enqueue("noop", {}), state.enqueue("noop", {})
    claims = {c.id: c.attempt_id for c in state.claim(worker.id, 2)}
    state.cancel(uuid.UUID(first["id"]))
    lost: list[tuple[uuid.UUID, str | None]] = []

    def on_lost(job_id: uuid.UUID, status: str | None) -> None:
        lost.append((job_id, status))

    watch = ClaimWatch(lambda: claims, on_lost, interval=1, stuck_after=timedelta(minutes=10))
    assert watch.run_once() == {"checked": 2, "lost": 1}
    assert lost == [(uuid.UUID(first["id"]), "cancelled")]
    assert uuid.UUID(second["id"]) in claims


def test_runnable_jobs_can_be_asked_about_given_ids():
    wanted = state.enqueue("noop", {}, priority=3)
    state.enqueue("noop", {}, priority=1)
    entries, truncated = runnable_jobs(limit=10, job_ids=[uuid.UUID(wanted["id"])])
    assert [str(e.job_id) for e in entries] == [wanted["id"]] and not truncated
    assert entries[0].priority == 3
