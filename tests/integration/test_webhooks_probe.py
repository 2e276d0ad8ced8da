"""Webhook deliveries as a receiver's developer meets them: verified exactly as the README
tells a receiver to, each event's id the same on every attempt (so that a receiver can skip
a repeat), and a disabled webhook sending nothing more, wherever its deliveries wait. A real
worker loop delivers to a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobStatus, Webhook
from jobs.webhooks import create_webhook, send_test
from tests.console.test_webhooks import Receiver
from worker.worker import Worker as WorkerLoop

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_webhook_cache"),
]


def readme_verifier() -> Callable[[bytes, str | None, str], dict[str, Any]]:
    """`verified_event` as the README's webhook section writes it, to be run as written."""
    text = README.read_text()
    section = text[text.index("**Webhooks** (Settings page)") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "the README's webhook section shows a receiver no code"
    namespace: dict[str, Any] = {}
    exec(code.group(1), namespace)  # noqa: S102 - the README's own example, run as a receiver would
    verifier: Callable[[bytes, str | None, str], dict[str, Any]] = namespace["verified_event"]
    return verifier


def deliver() -> None:
    """Run every delivery that is due, in this process."""
    assert WorkerLoop(once=True).run() == 0


def answer_try_later(receiver: Receiver) -> None:
    # Retry-After puts the next attempt an hour away, so that a worker's run, slow as it may
    # be, ends before it; `make_due` brings it forward when a test wants it.
    receiver.status = 503
    receiver.answer_headers = {"Retry-After": "3600"}


def answer_ok(receiver: Receiver) -> None:
    receiver.status = 200
    receiver.answer_headers = {}


def make_due(job_id: Any) -> None:
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(seconds=1))


def test_a_real_delivery_verifies_as_the_readme_tells_a_receiver(
    receiver: Receiver,
) -> None:
    verified_event = readme_verifier()
    hook = create_webhook(
        url=receiver.url, event_types=["job.created"], secret="whsec-päss", user=None
    )
    job = state.enqueue("noop", {"greeting": "grüß dich \u2028"}, priority=2)
    deliver()

    (request,) = receiver.requests
    signature = request["headers"]["X-Scheduler-Signature"]
    event = verified_event(request["body"], signature, "whsec-päss")
    assert event["type"] == "job.created"
    # The job object as the API answers it, at the event.
    assert event["data"] == job
    assert event["data"]["payload"] == {"greeting": "grüß dich \u2028"}
    assert request["headers"]["X-Scheduler-Webhook"] == str(hook.id)
    assert uuid.UUID(event["id"])

    # What a receiver must turn away, it does, without an exception of its own.
    for body, signed, secret in (
        (request["body"].replace(b"noop", b"nope"), signature, "whsec-päss"),
        (request["body"], signature, "whsec-pass"),
        (request["body"], None, "whsec-päss"),
        (request["body"], "sha256=" + "é" * 64, "whsec-päss"),
        (request["body"], signature.removeprefix("sha256="), "whsec-päss"),
    ):
        with pytest.raises(ValueError, match="not signed with this secret"):
            verified_event(body, signed, secret)


def received_event(request: dict[str, Any]) -> dict[str, Any]:
    body: bytes = request["body"]
    secret = "s"
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert request["headers"]["X-Scheduler-Signature"] == f"sha256={expected}"
    event: dict[str, Any] = json.loads(body)
    return event


def test_every_attempt_of_a_delivery_carries_its_events_one_id(
    receiver: Receiver,
) -> None:
    create_webhook(url=receiver.url, event_types=["job.created"], secret="s", user=None)
    create_webhook(url=receiver.url + "/copy", event_types=["job.created"], secret="s", user=None)
    answer_try_later(receiver)
    first = state.enqueue("noop", {"n": 1}, priority=2)
    second = state.enqueue("noop", {"n": 2}, priority=2)
    deliver()
    assert len(receiver.requests) == 4  # two events, two webhooks each
    failed = list(Job.objects.filter(type="http_request"))
    assert {d.status for d in failed} == {JobStatus.FAILED}

    # Had the receiver handled each event and its answer been lost, the next attempts send
    # them again: it tells them by their id, as it would a recorded request sent again.
    answer_ok(receiver)
    for delivery in failed:
        make_due(delivery.id)
    deliver()
    assert len(receiver.requests) == 8
    ids: dict[str, set[str]] = {}
    for request in receiver.requests:
        event = received_event(request)
        assert request["headers"]["X-Scheduler-Event-Id"] == event["id"]
        ids.setdefault(event["data"]["id"], set()).add(event["id"])
    assert set(ids) == {first["id"], second["id"]}
    # One id per event, whichever attempt and whichever webhook carried it.
    assert all(len(seen) == 1 for seen in ids.values())
    assert ids[first["id"]] != ids[second["id"]]
    # A test delivery is an event of its own.
    hook = Webhook.objects.order_by("id").first()
    assert hook is not None
    tests = {json.loads(send_test(hook)["payload"]["body"])["id"] for _ in range(2)}
    assert len(tests) == 2 and not tests & set().union(*ids.values())


def test_a_disabled_webhooks_deliveries_are_not_sent_wherever_they_wait(
    receiver: Receiver,
) -> None:
    hook = create_webhook(url=receiver.url, event_types=["job.created"], secret="s", user=None)
    answer_try_later(receiver)
    state.enqueue("noop", {}, priority=2)
    state.enqueue("noop", {}, priority=2)
    deliver()
    assert len(receiver.requests) == 2
    retrying, dead = Job.objects.filter(type="http_request").order_by("created_at")
    Job.objects.filter(id=dead.id).update(max_retries=2)
    make_due(dead.id)
    deliver()
    dead.refresh_from_db()
    assert dead.in_dlq
    queued = state.enqueue("noop", {}, priority=2)

    # Disabled, as the admin's "Active" box does, not deleted.
    hook.is_active = False
    hook.save()
    answer_ok(receiver)
    receiver.requests.clear()
    state.retry_from_dlq(dead.id)
    make_due(retrying.id)
    deliver()

    assert receiver.requests == []
    (waiting,) = [
        d
        for d in Job.objects.filter(type="http_request")
        if json.loads(d.payload["body"])["data"]["id"] == queued["id"]
    ]
    for delivery in Job.objects.filter(id__in=[retrying.id, dead.id, waiting.id]):
        assert delivery.status == JobStatus.COMPLETED and not delivery.in_dlq
        assert delivery.result == {"sent": False, "reason": f"webhook {hook.id} is disabled"}

    # A test delivery is an operator's own request, made to check the receiver before
    # enabling the webhook again: it is sent.
    send_test(hook)
    deliver()
    (request,) = receiver.requests
    assert received_event(request)["type"] == "webhook.test"


def test_an_events_delivery_is_tried_for_a_day_and_a_test_delivery_as_any_job(
    receiver: Receiver, settings: Any
) -> None:
    """Retried as any job (1 s, 5 s), a delivery reached the DLQ six seconds after its first
    failure: a receiver redeployed for a minute lost every event of that minute. Event
    deliveries take WEBHOOK_MAX_RETRIES attempts (5^(n-1) s apart: the ninth a day later);
    a test delivery, which an operator watches, keeps the default."""
    create_webhook(url=receiver.url, event_types=["job.created"], secret="s", user=None)
    state.enqueue("noop", {}, priority=2)
    (delivery,) = Job.objects.filter(type="http_request")
    assert delivery.max_retries == settings.WEBHOOK_MAX_RETRIES == 9
    hook = Webhook.objects.get()
    assert send_test(hook)["max_retries"] == settings.SCHEDULER_DEFAULT_MAX_RETRIES


def test_the_events_of_a_job_at_the_payload_limit_are_delivered(receiver: Receiver) -> None:
    # A payload under API_MAX_BODY_BYTES, its event's body escaped once more as a string in
    # the delivery's payload: the delivery was refused at that same limit, the webhook then
    # left out for the cache's 5 s, and the next job's event was lost with it.
    create_webhook(url=receiver.url, event_types=["job.created"], secret="s3cret", user=None)
    big = state.enqueue("noop", {"lines": ['"quoted" ' * 10] * 9_000}, priority=2)
    small = state.enqueue("noop", {"n": 1}, priority=2)
    deliver()

    ids = [json.loads(request["body"])["data"]["id"] for request in receiver.requests]
    assert sorted(ids) == sorted([big["id"], small["id"]])


def test_a_receiver_answering_410_gone_gets_that_delivery_no_more(receiver: Receiver) -> None:
    # 410 Gone says the endpoint will not come back: each delivery to it was tried nine
    # times over a day, then sat in the DLQ. It ends at once, unsent, as a delivery to a
    # deleted webhook does; any other request answered 410 fails as before.
    create_webhook(url=receiver.url, event_types=["job.created"], secret="s3cret", user=None)
    receiver.status = 410
    job = state.enqueue("noop", {"n": 1}, priority=2)
    deliver()

    assert len(receiver.requests) == 1
    (delivery,) = Job.objects.filter(type="http_request")
    assert (delivery.status, delivery.attempt_count) == (JobStatus.COMPLETED, 1)
    assert delivery.result["sent"] is False
    assert "410" in delivery.result["reason"]
    assert job["id"] in receiver.requests[0]["body"].decode()

    plain = state.enqueue(
        "http_request", {"method": "POST", "url": receiver.url, "json": {}}, max_retries=1
    )
    deliver()
    assert b"{}" in [request["body"] for request in receiver.requests]  # it was sent
    assert Job.objects.get(id=plain["id"]).in_dlq
