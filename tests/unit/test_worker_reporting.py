"""A job whose outcome the worker is still reporting is `processing` under it: a notification
of that job (a late one, or one sent again) must not put it back into the scheduler, where a
claim could take it, until the report is back."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from jobs.state import ClaimedJob
from worker.schedulers.base import ScheduledJob
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


def test_a_retry_offered_again_by_a_feed_is_timed_without_ending_the_loop(worker):
    """A retry's offer is built from the job object (times to the millisecond), a feed's
    from the row (to the microsecond). After a late notification of the job in between, two
    timers of one job for one time could not be ordered, and the loop ended with a TypeError
    (a probe's worker did, beside a cron job)."""
    job_id = uuid.uuid4()
    created = datetime.now(UTC).replace(microsecond=123456) - timedelta(seconds=1)
    retry_at = created + timedelta(seconds=31)
    retry = {"id": str(job_id), "type": "noop", "priority": 2, "run_at": retry_at}
    worker._reporting.update([job_id])
    worker.inbox.put(
        (
            "reported",
            (
                [job_id],
                [
                    ScheduledJob.from_row(
                        {**retry, "created_at": created.isoformat(timespec="milliseconds")}
                    )
                ],
            ),
        )
    )
    late = {**retry, "run_at": created.isoformat(), "created_at": created.isoformat()}
    worker.inbox.put(("notify", json.dumps(late)))
    worker._receive(0)

    worker._offer([ScheduledJob.from_row({**retry, "created_at": created})])

    assert worker._later_at == {job_id: retry_at}
