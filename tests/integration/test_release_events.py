"""What a subscriber of job events (a webhook, the live stream fed from the Redis channel)
hears of a job its stopping worker put back (`state.release`), against one a dead worker
lost (`state.rescue_lost`): a release is no failure of the job's, a lost worker may be."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs import state, webhooks
from jobs.models import Job, Worker
from jobs.webhooks import create_webhook
from tests.conftest import EventListener

from .test_state import claimed, new_worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _every_event_to_a_webhook() -> Iterator[None]:
    webhooks.active_webhooks.invalidate()
    create_webhook(
        url="https://example.com/hook",
        event_types=list(webhooks.DELIVERABLE_EVENT_TYPES),
        secret="s",
        user=None,
    )
    yield
    webhooks.active_webhooks.invalidate()


def delivered_about(job: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Event type -> the job objects of the webhook deliveries about `job` (deliveries are
    jobs of their own, sent in no set order)."""
    delivered: dict[str, list[dict[str, Any]]] = {}
    for delivery in Job.objects.filter(type="http_request"):
        body = json.loads(delivery.payload["body"])
        if body["data"]["id"] == job["id"]:
            delivered.setdefault(body["type"], []).append(body["data"])
    return delivered


def streamed_about(events: EventListener, job: dict[str, Any], last: str) -> list[str]:
    """The types of the events about `job` on the live channel, once `last` arrived."""
    events.wait_for(last, lambda data: data["id"] == job["id"])
    events.drain(0.3)
    return [e["type"] for e in events.received if e["data"].get("id") == job["id"]]


def test_a_released_job_is_announced_as_scheduled_again_never_as_failed(events):
    worker = new_worker()
    # Its only attempt: a failure of the job's would have sent it to the dead-letter queue.
    job = state.enqueue("noop", {}, max_retries=1)
    started = claimed(worker, job).job

    (released,) = state.release(worker.id, "Worker stopped before the job finished.")

    assert (released["status"], released["in_dlq"], released["attempt_count"]) == (
        "pending", False, 0,
    )  # fmt: skip
    assert delivered_about(job) == {
        "job.created": [job],
        "job.started": [started],
        "job.retry_scheduled": [released],
    }
    assert streamed_about(events, job, "job.retry_scheduled") == [
        "job.created",
        "job.started",
        "job.retry_scheduled",
    ]


def test_a_job_rescued_from_a_dead_worker_is_announced_as_failed_then_its_fate(events):
    worker = new_worker()
    retrying = state.enqueue("noop", {"n": 1}, max_retries=2)
    dying = state.enqueue("noop", {"n": 2}, max_retries=1)
    for job in (retrying, dying):
        claimed(worker, job)
    Worker.objects.filter(id=worker.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    rescued = state.rescue_lost(stuck_after=timedelta(hours=2), worker_timeout=timedelta(minutes=1))

    fates = {job["id"]: job for job in rescued}
    assert (fates[retrying["id"]]["status"], fates[dying["id"]]["in_dlq"]) == ("pending", True)
    for job, fate in ((retrying, "job.retry_scheduled"), (dying, "job.dlq_entry")):
        delivered = delivered_about(job)
        assert sorted(delivered) == sorted(["job.created", "job.started", "job.failed", fate])
        assert delivered["job.failed"] == delivered[fate] == [fates[job["id"]]]
    assert streamed_about(events, retrying, "job.retry_scheduled") == [
        "job.created", "job.started", "job.failed", "job.retry_scheduled",
    ]  # fmt: skip
    assert streamed_about(events, dying, "job.dlq_entry") == [
        "job.created", "job.started", "job.failed", "job.dlq_entry",
    ]  # fmt: skip
