"""The after-commit notifier: what each subscriber of a transition hears, and when."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from jobs import events, state, stats, webhooks
from jobs.models import Job, Worker
from jobs.notifier import Batch, notifier

pytestmark = pytest.mark.django_db(transaction=True)


class Recorder:
    def __init__(self) -> None:
        self.batches: list[Batch] = []

    def __call__(self, batch: Batch) -> None:
        self.batches.append(batch)

    @property
    def events(self) -> list[tuple[str, str]]:
        return [(event, data["id"]) for batch in self.batches for event, data in batch.events]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    monkeypatch.setattr(notifier, "_subscribers", [*notifier._subscribers, recorder])
    yield recorder


def test_the_app_subscribes_the_publisher_the_counters_and_the_webhooks() -> None:
    assert notifier._subscribers[:3] == [
        events.publish_batch,
        stats.count_batch,
        webhooks.dispatch_batch,
    ]


def test_a_transition_is_heard_once_after_its_commit(recorder: Recorder) -> None:
    with transaction.atomic():
        job = state.enqueue("noop", {})
        assert recorder.batches == []  # nothing before the commit
    assert recorder.events == [("job.created", job["id"])]
    assert recorder.batches[0].counts_changed is True


def test_a_rolled_back_transition_is_never_heard(recorder: Recorder) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        state.enqueue("noop", {})
        raise RuntimeError("roll back")
    assert recorder.batches == []


def test_a_claimed_batch_reaches_each_subscriber_as_one_batch(recorder: Recorder) -> None:
    created = [state.enqueue("noop", {}) for _ in range(3)]
    recorder.batches.clear()
    now = timezone.now()
    worker = Worker.objects.create(hostname="t", pid=os.getpid(), started_at=now, heartbeat_at=now)
    claimed = state.claim(worker.id, 10)
    assert len(recorder.batches) == 1
    assert sorted(recorder.events) == sorted(("job.started", job["id"]) for job in created)
    assert {c.id for c in claimed} == {uuid.UUID(job["id"]) for job in created}


def test_a_bulk_creation_is_heard_as_one_batch_with_each_job_created(recorder: Recorder) -> None:
    created = state.enqueue_many([state.JobSpec("noop", {}) for _ in range(3)])
    assert len(recorder.batches) == 1
    assert recorder.events == [("job.created", job["id"]) for job in created]
    assert recorder.batches[0].counts_changed is True


def test_a_rolled_back_bulk_creation_leaves_nothing(recorder: Recorder) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        state.enqueue_many([state.JobSpec("noop", {}) for _ in range(3)])
        raise RuntimeError("roll back")
    assert recorder.batches == []
    assert not Job.objects.exists()


def test_a_bulk_creation_of_several_statements_keeps_its_order(recorder: Recorder) -> None:
    """Seven jobs two per statement: four statements, up to three on their way at once."""
    specs = [state.JobSpec("noop", {"n": n}) for n in range(7)]
    created = state.enqueue_many(specs, batch_size=2)
    assert [job["payload"] for job in created] == [{"n": n} for n in range(7)]
    stored = Job.objects.filter(id__in=[job["id"] for job in created])
    assert sorted(job.payload["n"] for job in stored) == list(range(7))
    assert recorder.events == [("job.created", job["id"]) for job in created]


@pytest.fixture
def refused_payload() -> Iterator[dict[str, bool]]:
    """A database that refuses to store a job whose payload says so, as a constraint would."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " RAISE EXCEPTION 'refused by the database'; END $$;"
            " CREATE TRIGGER test_refuse BEFORE INSERT ON jobs FOR EACH ROW"
            " WHEN (NEW.payload ? 'refuse') EXECUTE FUNCTION test_refuse()"
        )
    try:
        yield {"refuse": True}
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER test_refuse ON jobs; DROP FUNCTION test_refuse()")


def test_a_bulk_creation_refused_in_a_later_statement_leaves_nothing(
    recorder: Recorder, refused_payload: dict[str, bool]
) -> None:
    """The third of four statements fails while the fourth is already sent: no job of the
    call is stored or heard of, and the connection serves the next call."""
    specs = [state.JobSpec("noop", {}) for _ in range(7)]
    specs[5] = state.JobSpec("noop", refused_payload)
    with pytest.raises(DatabaseError, match="refused by the database"):
        state.enqueue_many(specs, batch_size=2)
    assert not Job.objects.exists()
    assert recorder.batches == []
    created = state.enqueue_many([state.JobSpec("noop", {})] * 3, batch_size=2)
    assert Job.objects.count() == 3
    assert recorder.events == [("job.created", job["id"]) for job in created]


def test_a_failing_subscriber_does_not_silence_the_others(
    monkeypatch: pytest.MonkeyPatch, recorder: Recorder
) -> None:
    def broken(batch: Batch) -> Any:
        raise RuntimeError("subscriber bug")

    monkeypatch.setattr(notifier, "_subscribers", [broken, *notifier._subscribers])
    job = state.enqueue("noop", {})
    assert recorder.events == [("job.created", job["id"])]
