"""Limits as an operator changes them while workers claim under them, and as Python code
sets them: a change never fails a claim in flight, and what cannot be a limit is refused
the way the API refuses it."""

from __future__ import annotations

import os
import threading

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs import queues, state
from jobs.models import Job, Limit, LimitStart, Worker

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def someone_waits_for_a_lock() -> bool:
    """A session of this database waits for a lock (pg_locks: pg_stat_activity is read once
    per transaction)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return cursor.fetchone()[0] > 0


def test_a_limit_removed_while_a_claim_counts_under_it_lets_the_claim_commit() -> None:
    # The start the claim recorded referred to the limit the removal had deleted: the claim
    # failed at its commit (a foreign key violation), which a worker logs as "database
    # unavailable" and backs off from.
    queues.set_limit("type", "noop", max_starts=10, period_seconds=60)
    job = state.enqueue("noop", {})
    now = timezone.now()
    worker = Worker.objects.create(
        hostname="probe", pid=os.getpid(), started_at=now, heartbeat_at=now
    )
    removal: list[Exception | None] = []

    def remove() -> None:
        try:
            queues.remove_limit("type", "noop")
            removal.append(None)
        except Exception as exc:  # asserted by the test's thread
            removal.append(exc)
        finally:
            connection.close()

    remover = threading.Thread(target=remove)
    with transaction.atomic():
        assert len(state.claim(worker.id, 1, [job["id"]])) == 1
        remover.start()
        # The removal waits for the claim, or (as it did) is done before the claim commits.
        wait_for(lambda: removal or someone_waits_for_a_lock(), what="the removal to wait")
    remover.join(10)

    assert removal == [None]
    assert Job.objects.get(id=job["id"]).status == "processing"
    assert not Limit.objects.exists()
    assert not LimitStart.objects.exists()


@pytest.mark.parametrize("value", [2.5, "3", True])
def test_a_limit_set_from_python_takes_whole_numbers_only(value: object) -> None:
    # 2.5 was stored as 2 without a word, and "3" raised a TypeError rather than the
    # JobValidationError that the API, the console and the admin answer with.
    with pytest.raises(state.JobValidationError) as refused:
        queues.set_limit("queue", "emails", max_running=value)  # type: ignore[arg-type]
    assert refused.value.details == {"max_running": ["Must be an integer from 1 to 1000000."]}
    with pytest.raises(state.JobValidationError) as refused:
        queues.set_limit("queue", "emails", max_starts=10, period_seconds=value)  # type: ignore[arg-type]
    assert refused.value.details == {"period_seconds": ["Must be an integer from 1 to 86400."]}
    assert not Limit.objects.exists()
