"""A limit an operator changes counts what happened before the change: a longer period
counts the starts already made within it, so no window of the new period ever holds more
than `max_starts` starts."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from django.utils import timezone

from jobs import queues, state
from jobs.models import JobAttempt, Worker

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(worker: Worker, jobs: list[dict[str, Any]]) -> int:
    return len(state.claim(worker.id, len(jobs), [uuid.UUID(job["id"]) for job in jobs]))


@pytest.fixture
def worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname="probe", pid=os.getpid(), started_at=now, heartbeat_at=now
    )


def test_a_longer_period_counts_the_starts_made_within_it(worker: Worker) -> None:
    queues.set_limit("type", "noop", max_starts=3, period_seconds=1)
    jobs = [state.enqueue("noop", {}) for _ in range(6)]
    assert claimed(worker, jobs[:2]) == 2
    # Out of the 1-second window by the database's clock, the one the limit reads.
    wait_for(
        lambda: queues.limit_usage("type", "noop")["recent_starts"] == 0,
        what="the first starts to leave the period",
    )
    # Kept for a longer period, they still leave the limit's own: its whole room is back.
    assert claimed(worker, jobs[2:5]) == 3

    # The five starts were made within the last hour: an hour's limit of 3 is full. The
    # claim after the first period had forgotten the first two, and a sixth job started.
    limit = queues.set_limit("type", "noop", max_starts=3, period_seconds=3600)
    assert limit["recent_starts"] == 5
    assert claimed(worker, jobs[5:]) == 0
    assert JobAttempt.objects.count() == 5
