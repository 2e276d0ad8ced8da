"""Jobs in every state for the API tests.

`job_in_state` drives real transitions of `jobs.state` (enqueue, claim, fail, complete).
`job_row` writes a row with chosen timestamps directly: the filter tests need times that
no transition would produce on demand.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobStatus, Worker
from jobs.scheduling import virtual_deadline
from tests.attempts import fail_attempt

T0 = datetime(2026, 6, 11, 12, 0, tzinfo=UTC)


def ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@pytest.fixture
def job_row(db: None) -> Callable[..., Job]:
    def make(**fields: Any) -> Job:
        created = fields.pop("created_at", T0)
        scheduled = fields.pop("scheduled_at", created)
        priority = fields.pop("priority", 2)
        values: dict[str, Any] = {
            "type": "noop",
            "payload": {},
            "priority": priority,
            "scheduled_at": scheduled,
            "created_at": created,
            "updated_at": fields.pop("updated_at", created),
            "run_at": scheduled,
            "virtual_deadline": virtual_deadline(priority, scheduled),
        }
        values.update(fields)
        return Job.objects.create(**values)

    return make


@pytest.fixture
def worker(db: None) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname="test-host", pid=os.getpid(), started_at=now, heartbeat_at=now
    )


def claim_one(worker: Worker, job_id: str) -> state.ClaimedJob:
    # Inside a test's transaction the database clock stands at the transaction's start,
    # before the job's Python-side run_at: move run_at back so the job is due.
    Job.objects.filter(id=job_id).update(run_at=F("run_at") - timedelta(minutes=1))
    (claimed,) = state.claim(worker.id, 1, [uuid.UUID(job_id)])
    return claimed


@pytest.fixture
def job_in_state(worker: Worker) -> Callable[..., dict[str, Any]]:
    """`job_in_state("dlq")` -> the job object of a new job that went there for real."""

    def make(target: str, **enqueue_args: Any) -> dict[str, Any]:
        enqueue_args.setdefault("priority", 2)
        if target == "dlq":
            enqueue_args.setdefault("max_retries", 1)
        job = state.enqueue(enqueue_args.pop("type", "noop"), {}, **enqueue_args)
        if target == JobStatus.PENDING:
            return job
        if target == JobStatus.CANCELLED:
            return state.cancel(uuid.UUID(job["id"]))
        claimed = claim_one(worker, job["id"])
        if target == JobStatus.PROCESSING:
            return claimed.job
        if target == JobStatus.COMPLETED:
            finished = timezone.now()
            report = state.complete(
                [state.Success(claimed.id, claimed.attempt_id, {"ok": True}, finished)],
                worker.id,
            )
            return report.completed[0]
        failed = fail_attempt(
            claimed.id,
            claimed.attempt_id,
            error_type="RuntimeError",
            error_message="boom",
            stack_trace="Traceback ...",
            retry_delay=timedelta(minutes=5),
        )
        assert failed is not None
        assert failed["in_dlq"] is (target == "dlq")
        return failed

    return make
