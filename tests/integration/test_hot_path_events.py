"""The worker's batch claim and completion: each job keeps its own result, and the events
(built from the SQL job object's text, not re-encoded) carry what the API shows."""

from __future__ import annotations

import os
import uuid

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt, Worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_completion_records_each_jobs_result_and_publishes_the_api_job(events):
    now = timezone.now()
    worker = Worker.objects.create(
        hostname="hot", pid=os.getpid(), started_at=now, heartbeat_at=now
    )
    results = [None, {"nested": [1, 2.5, {"deep": None}]}, [3, "é"], 0]
    jobs = [state.enqueue("noop", {"n": n}) for n in range(len(results))]

    claims = state.claim(worker.id, len(jobs), [uuid.UUID(job["id"]) for job in jobs])
    assert len(claims) == len(jobs)
    for claim in claims:
        started = events.wait_for("job.started", lambda data, c=claim: data["id"] == str(c.id))
        assert started["data"] == state.get_job(claim.id)

    by_payload = {claim.payload["n"]: claim for claim in claims}
    report = state.complete(
        [
            state.Success(by_payload[n].id, by_payload[n].attempt_id, result, timezone.now())
            for n, result in enumerate(results)
        ],
        worker.id,
    )

    assert len(report.completed) == len(jobs)
    for n, result in enumerate(results):
        claim = by_payload[n]
        assert Job.objects.get(id=claim.id).result == result
        assert JobAttempt.objects.get(id=claim.attempt_id).status == "succeeded"
        done = events.wait_for("job.completed", lambda data, c=claim: data["id"] == str(c.id))
        assert done["data"] == state.get_job(claim.id)
        assert done["data"]["result"] == result
