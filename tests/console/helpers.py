"""Getting jobs into the states the console shows, through the state machine only."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db.models import F
from django.test import Client
from django.utils import timezone

from jobs import queues, state
from jobs.models import Job, Worker
from tests.attempts import fail_attempt


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


def failed_once(
    type: str = "flaky",
    payload: dict[str, Any] | None = None,
    error: str = "boom",
    *,
    max_retries: int,
) -> dict[str, Any]:
    """A job whose first attempt failed: in the DLQ with max_retries=1, else retrying."""
    job = state.enqueue(type, payload or {}, priority=2, max_retries=max_retries)
    claimed = start(job["id"])
    failed = fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="HandlerFailure",
        error_message=error,
        stack_trace=f"Traceback (most recent call last):\n  ...\nHandlerFailure: {error}",
        retry_delay=timedelta(minutes=5),
    )
    assert failed is not None and failed["in_dlq"] is (max_retries == 1)
    return failed


def dead_letter(
    type: str = "flaky", payload: dict[str, Any] | None = None, error: str = "boom"
) -> dict[str, Any]:
    """A job that failed its only attempt."""
    return failed_once(type, payload, error, max_retries=1)


def completed(type: str = "noop") -> dict[str, Any]:
    job = state.enqueue(type, {}, priority=2)
    claimed = start(job["id"])
    report = state.complete(
        [state.Success(claimed.id, claimed.attempt_id, {"ok": True}, timezone.now())]
    )
    return report.completed[0]


def _blocked() -> dict[str, Any]:
    upstream = state.enqueue("noop", {}, priority=2)
    return state.enqueue("noop", {}, priority=2, depends_on=uuid.UUID(upstream["id"]))


def _processing() -> dict[str, Any]:
    job = state.enqueue("noop", {}, priority=2)
    return start(job["id"], make_worker()).job


# A new job in each display state of jobs/display.py, by name.
def _paused() -> dict[str, Any]:
    queues.pause("held")
    return state.enqueue("noop", {}, priority=2, queue="held")


NEW_JOB_IN: dict[str, Callable[[], dict[str, Any]]] = {
    "pending": lambda: state.enqueue("noop", {}, priority=2),
    "blocked": _blocked,
    "paused": _paused,
    "processing": _processing,
    "completed": completed,
    "retrying": lambda: failed_once(max_retries=3),
    "dlq": dead_letter,
    "cancelled": lambda: state.cancel(uuid.UUID(state.enqueue("noop", {}, priority=2)["id"])),
}


def login(user: Any) -> Client:
    """A browser session logged in as `user`."""
    client = Client()
    client.force_login(user)
    return client


def text(response: Any) -> str:
    return response.content.decode()
