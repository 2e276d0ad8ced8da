"""Getting jobs into the states the console shows, through the state machine only."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from jobs import state
from jobs.models import Job, Worker


def make_worker(*, heartbeat_age: float = 0.0, hostname: str = "node-a") -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname=hostname,
        pid=os.getpid(),
        started_at=now - timedelta(minutes=30),
        heartbeat_at=now - timedelta(seconds=heartbeat_age),
    )


def start(job_id: str, worker: Worker | None = None) -> state.ClaimedJob:
    worker = worker or make_worker()
    # Inside a test's transaction SQL now() is frozen at its start, before the job existed.
    Job.objects.filter(id=job_id).update(run_at=F("run_at") - timedelta(hours=1))
    (claimed,) = state.claim(worker.id, 1, [uuid.UUID(job_id)])
    return claimed


def dead_letter(
    type: str = "flaky", payload: dict[str, Any] | None = None, error: str = "boom"
) -> dict[str, Any]:
    """A job that failed its only attempt: enqueue, claim, fail with max_retries=1."""
    job = state.enqueue(type, payload or {}, priority=2, max_retries=1)
    claimed = start(job["id"])
    failed = state.fail(
        claimed.id,
        claimed.attempt_id,
        error_type="HandlerFailure",
        error_message=error,
        stack_trace=f"Traceback (most recent call last):\n  ...\nHandlerFailure: {error}",
        retry_delay=timedelta(seconds=1),
    )
    assert failed is not None and failed["in_dlq"]
    return failed


def completed(type: str = "noop") -> dict[str, Any]:
    job = state.enqueue(type, {}, priority=2)
    claimed = start(job["id"])
    report = state.complete(
        [state.Success(claimed.id, claimed.attempt_id, {"ok": True}, timezone.now())]
    )
    return report.completed[0]
