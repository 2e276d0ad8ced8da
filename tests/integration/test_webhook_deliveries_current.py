"""A webhook's deliveries follow the webhook as it is now: an operator who moves its URL (the
old host is gone) or rotates its secret expects the next delivery to go there, signed so.
A real worker loop delivers to a real HTTP server on 127.0.0.1 (`receiver`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobStatus, Webhook
from jobs.registry import JobContext, registry
from jobs.webhooks import create_webhook, send_test
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


def make_due(job_id: Any) -> None:
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(seconds=1))


def change_endpoint(hook: Webhook, url: str, secret: str) -> None:
    """What an operator does in the admin or the settings page: the URL moved, the secret
    rotated (it leaked)."""
    hook.url = url
    hook.secret = secret
    hook.save()


def event_of(delivery: Job) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(delivery.payload["body"])
    return event


def test_deliveries_made_before_a_change_go_where_the_webhook_is_now_signed_with_its_secret(
    receiver: Receiver,
) -> None:
    """Deliveries kept the URL and signature of the moment they were made: after a move and
    a rotation, one waiting for its turn, one waiting for a retry and one retried from the
    DLQ all went to the old URL signed with the old (leaked) secret. Each attempt now goes to
    the webhook's URL signed with its secret as they are then; the bytes and the event's id
    stay the delivery's own."""
    hook = create_webhook(
        url=receiver.url, event_types=["job.created"], secret="old-secret", user=None
    )
    receiver.status = 503
    receiver.answer_headers = {"Retry-After": "3600"}  # the retry waits for `make_due`
    state.enqueue("noop", {"n": 1}, priority=2)
    state.enqueue("noop", {"n": 2}, priority=2)
    deliver()
    retrying, dead = Job.objects.filter(type="http_request").order_by("created_at")
    Job.objects.filter(id=dead.id).update(max_retries=2)
    make_due(dead.id)
    deliver()
    dead.refresh_from_db()
    assert dead.in_dlq
    state.enqueue("noop", {"n": 3}, priority=2)
    (waiting,) = Job.objects.filter(type="http_request").exclude(id__in=[retrying.id, dead.id])

    change_endpoint(hook, moved(receiver), "new-secret")
    receiver.status = 200
    receiver.answer_headers = {}
    receiver.requests.clear()
    state.retry_from_dlq(dead.id)
    make_due(retrying.id)
    deliver()

    by_event = {json.loads(r["body"])["id"]: r for r in receiver.requests}
    assert len(receiver.requests) == 3
    for delivery in (waiting, retrying, dead):
        request = by_event[event_of(delivery)["id"]]
        assert request["path"] == "/hooks/moved"
        assert signed_with(request, "new-secret")
        assert request["body"] == delivery.payload["body"].encode()
        assert request["headers"]["X-Scheduler-Event-Id"] == event_of(delivery)["id"]
        assert request["headers"]["X-Scheduler-Webhook"] == str(hook.id)
    for delivery in Job.objects.filter(id__in=[waiting.id, retrying.id, dead.id]):
        assert delivery.status == JobStatus.COMPLETED and not delivery.in_dlq


def test_a_test_delivery_to_a_disabled_webhook_is_signed_with_the_secret_set_since(
    receiver: Receiver,
) -> None:
    hook = create_webhook(url=receiver.url, event_types=["job.failed"], secret="old", user=None)
    hook.is_active = False
    hook.save()
    send_test(hook)
    change_endpoint(hook, moved(receiver), "new")
    deliver()

    (request,) = receiver.requests
    assert request["path"] == "/hooks/moved"
    assert signed_with(request, "new")
    assert json.loads(request["body"])["type"] == "webhook.test"


def test_a_body_the_scheduler_did_not_make_is_never_signed_with_the_webhooks_secret(
    receiver: Receiver,
) -> None:
    """Whoever may create jobs (or edit a dead letter's payload) can write an `http_request`
    naming a webhook: signing at send time must not sign their body with a secret they do
    not know. Such a request goes to the webhook's URL with the signature it carries."""
    hook = create_webhook(url=receiver.url, event_types=["job.created"], secret="s3cret", user=None)
    forged = '{"id":"x","type":"job.completed","data":{"status":"completed"}}'
    headers = {
        "Content-Type": "application/json",
        "X-Scheduler-Event": "job.completed",
        "X-Scheduler-Webhook": str(hook.id),
        "X-Scheduler-Signature": "sha256=" + "0" * 64,
    }
    state.enqueue(
        "http_request",
        {"method": "POST", "url": receiver.url, "headers": headers, "body": forged},
        priority=2,
    )
    # A real delivery, its body edited in the DLQ before a retry.
    state.enqueue("noop", {"n": 1}, priority=2)
    (delivery,) = [
        d for d in Job.objects.filter(type="http_request") if d.payload["body"] != forged
    ]
    Job.objects.filter(id=delivery.id).update(in_dlq=True, status=JobStatus.FAILED)
    edited = dict(delivery.payload, body=delivery.payload["body"].replace("noop", "nope"))
    state.retry_with_payload(delivery.id, edited)
    change_endpoint(hook, moved(receiver), "rotated")
    deliver()

    sent = {request["body"]: request for request in receiver.requests}
    assert set(sent) == {forged.encode(), edited["body"].encode()}
    for request in sent.values():
        assert request["path"] == "/hooks/moved"
        assert not signed_with(request, "s3cret")
        assert not signed_with(request, "rotated")
    assert sent[forged.encode()]["headers"]["X-Scheduler-Signature"] == "sha256=" + "0" * 64


def test_a_delivery_to_a_url_now_refused_is_not_sent(receiver: Receiver) -> None:
    """The URL a delivery goes to is the webhook's, and outbound's refusal applies to it as
    it is: moved (by a rule older than the one that refuses it now) to an address not
    allowed, the delivery fails naming why, and nothing reaches the old URL either."""
    hook = create_webhook(url=receiver.url, event_types=["job.created"], secret="s", user=None)
    state.enqueue("noop", {"n": 1}, priority=2)
    refused = receiver.url.replace("127.0.0.1", "127.0.0.2")
    Webhook.objects.filter(id=hook.id).update(url=refused)
    deliver()

    assert receiver.requests == []
    (delivery,) = Job.objects.filter(type="http_request")
    assert delivery.status == JobStatus.FAILED
    assert "127.0.0.2" in (delivery.last_error or "")
    assert "OUTBOUND_ALLOWED_NETWORKS" in (delivery.last_error or "")


def test_an_attempt_reads_its_webhook_with_one_query(receiver: Receiver) -> None:
    hook = create_webhook(url=receiver.url, event_types=["job.created"], secret="s", user=None)
    state.enqueue("noop", {"n": 1}, priority=2)
    (delivery,) = Job.objects.filter(type="http_request")
    change_endpoint(hook, moved(receiver), "t")
    context = JobContext(
        delivery.id,
        delivery.type,
        delivery.payload,
        uuid.uuid4(),
        1,
        logging.getLogger(__name__),
    )
    with CaptureQueriesContext(connection) as queries:
        result = registry.load("http_request").run(context)

    assert result["status"] == 200
    assert len(queries) == 1
    (request,) = receiver.requests
    assert request["path"] == "/hooks/moved" and signed_with(request, "t")
