"""A job whose outcome the worker is still reporting is `processing` under it: a notification
of that job (a late one, or one sent again) must not put it back into the scheduler, where a
claim could take it, until the report is back."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import pytest

from jobs.state import ClaimedJob
from worker.worker import Worker


def notification(job_id: uuid.UUID) -> tuple[str, str]:
    now = datetime.now(UTC).isoformat()
    payload = {"id": str(job_id), "type": "noop", "priority": 2, "run_at": now, "created_at": now}
    return ("notify", json.dumps(payload))


def run_to_its_outcome(worker: Worker) -> uuid.UUID:
    """Start a job on the worker (`noop`: it finishes at once) and wait until its outcome is
    in the inbox; the job's id."""
    job_id = uuid.uuid4()
    job = ClaimedJob(job_id, "noop", {}, 2, uuid.uuid4(), 1, 3, {"id": str(job_id)})
    worker.processor.start(job)
    deadline = time.monotonic() + 10
    while worker.inbox.empty():
        assert time.monotonic() < deadline, "no outcome"
        time.sleep(0.01)
    return job_id


@pytest.mark.parametrize("same_batch", [True, False])
def test_a_job_being_reported_is_not_offered_until_its_report_is_back(worker, same_batch):
    job_id = run_to_its_outcome(worker)
    if not same_batch:
        worker._receive(0)
    worker.inbox.put(notification(job_id))
    worker._receive(0)

    assert job_id not in worker.processor.running
    assert job_id not in worker.scheduler
    assert worker._reporting == {job_id: 1}

    worker.inbox.put(("reported", ([job_id], [])))
    worker.inbox.put(notification(job_id))
    worker._receive(0)

    assert not worker._reporting
    assert job_id in worker.scheduler
