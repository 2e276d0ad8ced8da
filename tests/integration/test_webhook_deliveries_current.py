"""A webhook's deliveries follow the webhook as it is now: an operator who moves its URL (the
old host is gone) or rotates its secret expects the next delivery to go there, signed so.
A real worker loop delivers to a real HTTP server on 127.0.0.1 (`receiver`)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from jobs import state
from jobs.models import Job, Webhook
from jobs.webhooks import create_webhook
from tests.console.test_webhooks import Receiver
from worker.worker import Worker as WorkerLoop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_webhook_cache"),
]


def deliver() -> None:
    """Run every delivery that is due, in this process."""
    assert WorkerLoop(once=True).run() == 0


def signed_with(request: dict[str, Any], secret: str) -> bool:
    """Whether a receiver holding `secret` accepts the request (the README's check)."""
    expected = "sha256=" + hmac.new(secret.encode(), request["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, request["headers"]["X-Scheduler-Signature"])


def moved(receiver: Receiver) -> str:
    """Another URL of the same receiver, which it records as the request's path."""
    return receiver.url.replace("/hooks/scheduler", "/hooks/moved")


def test_a_process_whose_webhook_list_is_older_than_a_change_sends_the_webhook_as_it_is(
    receiver: Receiver,
) -> None:
    """Each process keeps the active webhooks for WEBHOOK_CACHE_SECONDS, and only a save in
    the same process clears that copy: a worker that had read them before an operator moved
    the URL and rotated the secret in the admin enqueued, until its copy expired, deliveries
    to the old URL signed with the old secret. The query that confirms the webhook is still
    active now also reads what it is."""
    hook = create_webhook(
        url=receiver.url, event_types=["job.created"], secret="old-secret", user=None
    )
    state.enqueue("noop", {"n": 1}, priority=2)  # this process reads its webhooks
    # Changed as another process changes it: this process's copy is not told.
    Webhook.objects.filter(id=hook.id).update(url=moved(receiver), secret="new-secret")

    job = state.enqueue("noop", {"n": 2}, priority=2)
    (delivery,) = [
        d
        for d in Job.objects.filter(type="http_request")
        if json.loads(d.payload["body"])["data"]["id"] == job["id"]
    ]
    assert delivery.payload["url"] == moved(receiver)
    Job.objects.exclude(id=delivery.id).filter(type="http_request").delete()
    deliver()

    (request,) = receiver.requests
    assert request["path"] == "/hooks/moved"
    assert signed_with(request, "new-secret")
    assert json.loads(request["body"])["data"]["id"] == job["id"]
