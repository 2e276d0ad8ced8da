"""Notification webhooks: validation, signed deliveries as `http_request` jobs, no loops,
no cost without webhooks, and real deliveries by a real worker to a local HTTP server."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import state, webhooks
from jobs.models import Job, JobStatus, Webhook, Worker
from jobs.webhooks import create_webhook, delete_webhook, send_test, sign
from worker.worker import Worker as WorkerLoop

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("fresh_webhook_cache")


class Receiver:
    """An HTTP server on 127.0.0.1 that records every request and answers `status`, with
    `answer_headers`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.answer_headers: dict[str, str] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "body": body}
                )
                self.send_response(receiver.status)
                for name, value in receiver.answer_headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(b"thanks")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/scheduler"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings: Any, subprocess_env: dict[str, str]) -> Iterator[Receiver]:
    # This test's own receiver, on loopback: allowed here and in the worker processes.
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    subprocess_env["OUTBOUND_ALLOWED_NETWORKS"] = "127.0.0.1/32"
    server = Receiver()
    yield server
    server.close()


def run_worker_once(env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "runworker", "--once", "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]


def deliveries() -> list[Job]:
    return list(Job.objects.filter(type="http_request").order_by("created_at"))


def verify(request: dict[str, Any], secret: str) -> dict[str, Any]:
    """What a receiver does: check the signature over the raw body, then parse it."""
    expected = hmac.new(secret.encode(), request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Scheduler-Signature"] == f"sha256={expected}"
    return dict(json.loads(request["body"]))


# --- pure parts -------------------------------------------------------------------------------


def test_sign_is_hmac_sha256_hex() -> None:
    # RFC 4231, test case 2.
    assert (
        sign("Jefe", b"what do ya want for nothing?")
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "event_types", "secret", "fields"),
    [
        ("ftp://example.com/hook", ["job.completed"], "s3cret", {"url"}),
        ("not a url", ["job.completed"], "s3cret", {"url"}),
        ("", ["job.completed"], "s3cret", {"url"}),
        # Control characters Django's URLValidator lets through: no delivery could send them.
        ("https://example.com/a\x01b", ["job.completed"], "s3cret", {"url"}),
        ("https://example.com/hook\x7f", ["job.completed"], "s3cret", {"url"}),
        ("https://example.com/hook", [], "s3cret", {"event_types"}),
        ("https://example.com/hook", ["stats.updated"], "s3cret", {"event_types"}),
        ("https://example.com/hook", ["job.exploded"], "s3cret", {"event_types"}),
        ("https://example.com/hook", "job.completed", "s3cret", {"event_types"}),
        ("https://example.com/hook", ["job.completed"], "  ", {"secret"}),
        ("javascript:alert(1)", [], "", {"url", "event_types", "secret"}),
    ],
)
def test_create_webhook_refuses_bad_input_field_by_field(
    url: str, event_types: Any, secret: str, fields: set[str]
) -> None:
    with pytest.raises(state.JobValidationError) as refused:
        create_webhook(url=url, event_types=event_types, secret=secret, user=None)
    assert set(refused.value.details) == fields
    assert all(refused.value.details[f] for f in fields)
    assert not Webhook.objects.exists()


@pytest.mark.django_db
def test_create_and_delete_webhook(operator: Any) -> None:
    hook = create_webhook(
        url=" https://example.com/hook ",
        event_types=["job.dlq_entry", "job.completed", "job.dlq_entry"],
        secret="s3cret",
        user=operator,
    )
    hook.refresh_from_db()
    assert (hook.url, hook.event_types, hook.secret) == (
        "https://example.com/hook",
        ["job.dlq_entry", "job.completed"],
        "s3cret",
    )
    assert hook.is_active and hook.created_by == operator

    delete_webhook(hook.id)
    delete_webhook(hook.id)  # already gone: nothing to do, nothing raised
    assert not Webhook.objects.exists()


# --- dispatch ---------------------------------------------------------------------------------


def finish(job_id: str) -> dict[str, Any]:
    now = timezone.now()
    worker = Worker.objects.create(hostname="test", pid=1, started_at=now, heartbeat_at=now)
    (claimed,) = state.claim(worker.id, 1, [uuid.UUID(job_id)])
    report = state.complete(
        [state.Success(claimed.id, claimed.attempt_id, {"done": True}, now)], worker.id
    )
    return report.completed[0]


@pytest.mark.django_db(transaction=True)
def test_a_matching_event_becomes_one_signed_http_request_job() -> None:
    hook = create_webhook(
        url="https://example.com/hook", event_types=["job.completed"], secret="s3cret", user=None
    )
    job = state.enqueue("noop", {"n": 1}, priority=2)
    assert deliveries() == []  # job.created is not subscribed

    completed = finish(job["id"])

    (delivery,) = deliveries()
    payload = delivery.payload
    assert delivery.status == JobStatus.PENDING and delivery.max_retries >= 1
    assert payload["method"] == "POST" and payload["url"] == "https://example.com/hook"
    assert payload["headers"]["X-Scheduler-Event"] == "job.completed"
    assert payload["headers"]["X-Scheduler-Webhook"] == str(hook.id)
    assert payload["headers"]["Content-Type"] == "application/json"
    body = payload["body"].encode()
    assert payload["headers"]["X-Scheduler-Signature"] == "sha256=" + sign("s3cret", body)
    event_id = payload["headers"]["X-Scheduler-Event-Id"]
    assert json.loads(body) == {"id": event_id, "type": "job.completed", "data": completed}
    # In a queue of their own, behind the jobs they report on: a receiver that holds each
    # delivery for its whole timeout takes handler threads only when no job of the
    # application's waits, and an operator can pause, limit or give slots to them apart.
    assert (delivery.queue, delivery.priority) == (webhooks.DELIVERY_QUEUE, 3)
    # A test delivery is for someone watching: first.
    test = Job.objects.get(id=send_test(hook)["id"])
    assert (test.queue, test.priority) == (webhooks.DELIVERY_QUEUE, 1)


@pytest.mark.django_db(transaction=True)
def test_deliveries_never_trigger_deliveries_and_inactive_or_deleted_hooks_stay_silent(
    settings: Any,
) -> None:
    settings.WEBHOOK_CACHE_SECONDS = 300
    every = list(webhooks.DELIVERABLE_EVENT_TYPES)
    hook = create_webhook(url="https://example.com/a", event_types=every, secret="a", user=None)
    create_webhook(url="https://example.com/b", event_types=every, secret="b", user=None)
    Webhook.objects.filter(url="https://example.com/b").update(is_active=False)
    webhooks.active_webhooks.invalidate()

    job = state.enqueue("noop", {}, priority=2)
    (delivery,) = deliveries()  # one for hook a; its own job.created is not delivered
    assert json.loads(delivery.payload["body"])["data"]["id"] == job["id"]
    state.cancel(delivery.id)  # an event about a delivery: still nothing new
    assert len(deliveries()) == 1

    # Deleted by another process: this process's cache still lists it, yet nothing is sent.
    assert [t.id for t in webhooks.active_webhooks.get()] == [hook.id]
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM webhooks WHERE id = %s", [hook.id])
    assert [t.id for t in webhooks.active_webhooks.get()] == [hook.id]
    state.cancel(uuid.UUID(job["id"]))
    assert len(deliveries()) == 1


@pytest.mark.django_db(transaction=True)
def test_a_webhook_whose_deliveries_are_refused_does_not_hold_back_the_others(
    caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    # Saved before the rule that refuses its URL (a control character): its deliveries are
    # refused when enqueued, and skipped, not taking the other webhooks' with them; it is
    # reported once each time the webhooks are read, not once an event.
    settings.WEBHOOK_CACHE_SECONDS = 300
    create_webhook(
        url="https://example.com/good", event_types=["job.created"], secret="s", user=None
    )
    stale = Webhook.objects.create(
        url="https://example.com/a\x01b", event_types=["job.created"], secret="s"
    )
    webhooks.active_webhooks.invalidate()
    with caplog.at_level(logging.ERROR, logger="jobs.webhooks"):
        state.enqueue("noop", {}, priority=2)
        state.enqueue("noop", {}, priority=2)

    assert [d.payload["url"] for d in deliveries()] == 2 * ["https://example.com/good"]
    (record,) = [r for r in caplog.records if r.name == "jobs.webhooks"]
    assert f"webhook {stale.id}" in record.getMessage()
    assert "payload.url: Must be an http:// or https:// URL" in record.getMessage()


@pytest.mark.django_db(transaction=True)
def test_without_webhooks_an_event_costs_no_query() -> None:
    job = state.enqueue("noop", {}, priority=2)
    assert webhooks.active_webhooks.get() == ()
    events = [("job.completed", job)] * 1000
    with CaptureQueriesContext(connection) as queries:
        assert webhooks.dispatch(events) == 0
    assert len(queries) == 0

    create_webhook(url="https://example.com/h", event_types=["job.failed"], secret="s", user=None)
    with CaptureQueriesContext(connection) as queries:
        assert webhooks.dispatch(events) == 0  # a webhook, but none for job.completed
    assert len(queries) == 1  # the cache refill after the create


# --- real deliveries through a real worker ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_send_test_and_event_deliveries_arrive_signed_through_the_worker(
    receiver: Receiver, subprocess_env: dict[str, str]
) -> None:
    hook = create_webhook(
        url=receiver.url, event_types=["job.completed"], secret="top-secret", user=None
    )

    test_job = send_test(hook)
    assert test_job["type"] == "http_request" and test_job["status"] == "pending"
    run_worker_once(subprocess_env)

    (request,) = receiver.requests
    assert request["path"] == "/hooks/scheduler"
    assert request["headers"]["X-Scheduler-Event"] == "webhook.test"
    assert request["headers"]["Content-Type"] == "application/json"
    assert verify(request, "top-secret") == {
        "id": request["headers"]["X-Scheduler-Event-Id"],
        "type": "webhook.test",
        "data": {"webhook_id": hook.id, "message": "Test delivery from the job scheduler."},
    }
    assert Job.objects.get(id=test_job["id"]).status == JobStatus.COMPLETED

    # An event that happens inside the worker is delivered by the worker too.
    job = state.enqueue("noop", {"deliver": "me"}, priority=1)
    run_worker_once(subprocess_env)
    if len(receiver.requests) == 1:  # the delivery was enqueued after this run's last feed
        run_worker_once(subprocess_env)

    assert len(receiver.requests) == 2
    delivered = verify(receiver.requests[1], "top-secret")
    assert receiver.requests[1]["headers"]["X-Scheduler-Event"] == "job.completed"
    assert delivered["type"] == "job.completed"
    assert delivered["data"]["id"] == job["id"]
    assert delivered["data"]["status"] == "completed"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_failing_receiver_makes_the_delivery_retry_like_any_job(
    receiver: Receiver, subprocess_env: dict[str, str]
) -> None:
    receiver.status = 503
    hook = create_webhook(url=receiver.url, event_types=["job.created"], secret="s", user=None)

    delivery = send_test(hook)
    run_worker_once(subprocess_env)

    assert len(receiver.requests) == 1
    failed = Job.objects.get(id=delivery["id"])
    assert failed.status == JobStatus.FAILED and not failed.in_dlq
    assert failed.attempt_count == 1 and failed.next_retry_at is not None
    assert "503" in (failed.last_error or "")


# --- a deleted webhook, credentials in its URL, its secret as typed ----------------------------


def validate_url(url: str) -> list[str]:
    return webhooks.validate(url, ["job.failed"], "s").get("url", [])


def enqueue_delivery(hook: Webhook, max_retries: int) -> uuid.UUID:
    spec = webhooks.delivery_spec(hook.id, hook.url, hook.secret, "webhook.test", {"n": 1})
    job = state.enqueue(spec.type, spec.payload, queue=spec.queue, max_retries=max_retries)
    return uuid.UUID(job["id"])


@pytest.mark.django_db(transaction=True)
def test_a_deleted_webhooks_deliveries_are_not_sent_wherever_they_wait(
    receiver: Receiver,
) -> None:
    hook = create_webhook(url=receiver.url, event_types=["job.failed"], secret="s", user=None)
    receiver.status = 503
    retrying = enqueue_delivery(hook, max_retries=3)
    dead = enqueue_delivery(hook, max_retries=1)
    assert WorkerLoop(once=True).run() == 0
    assert len(receiver.requests) == 2
    assert Job.objects.get(id=dead).in_dlq
    assert Job.objects.get(id=retrying).next_retry_at is not None
    queued = uuid.UUID(send_test(hook)["id"])

    delete_webhook(hook.id)
    receiver.status = 200
    receiver.requests.clear()
    state.retry_from_dlq(dead)
    Job.objects.filter(id=retrying).update(run_at=timezone.now() - timedelta(seconds=1))
    assert WorkerLoop(once=True).run() == 0

    assert receiver.requests == []
    for delivery in Job.objects.filter(id__in=[retrying, dead, queued]):
        assert delivery.status == JobStatus.COMPLETED and not delivery.in_dlq
        assert delivery.result == {"sent": False, "reason": f"webhook {hook.id} was deleted"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "https://user:hunter2@example.com/hook",
        "https://user@example.com/hook",
        "https://:hunter2@example.com/hook",
    ],
)
def test_a_webhook_url_with_credentials_is_refused_without_repeating_them(url: str) -> None:
    with pytest.raises(state.JobValidationError) as refused:
        create_webhook(url=url, event_types=["job.failed"], secret="s", user=None)
    (message,) = refused.value.details["url"]
    assert "user name or password" in message and "hunter2" not in message
    assert not Webhook.objects.exists()
    # Not a URL urlsplit can take apart: refused saying so, not an exception.
    assert validate_url("https://[::1@example.com/hook") == [
        "Its host or port cannot be read: Invalid IPv6 URL."
    ]
    # An @ further on is no credential.
    create_webhook(
        url="https://example.com/hook?to=ops@example.com",
        event_types=["job.failed"],
        secret="s",
        user=None,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("secret", ["  päd sec  ", "päd sec ", "\tpäd sec", "päd sec\n"])
def test_a_secret_with_whitespace_around_it_is_refused_and_one_inside_kept(secret: str) -> None:
    with pytest.raises(state.JobValidationError) as refused:
        create_webhook(
            url="https://example.com/h", event_types=["job.failed"], secret=secret, user=None
        )
    assert "begin or end with whitespace" in refused.value.details["secret"][0]
    hook = create_webhook(
        url="https://example.com/h", event_types=["job.failed"], secret="päd sec", user=None
    )
    hook.refresh_from_db()
    assert hook.secret == "päd sec"


@pytest.mark.django_db
def test_the_settings_page_says_which_webhooks_are_disabled(as_operator: Client) -> None:
    """Unticked in the admin, a webhook gets nothing more; the page listed it as any other."""
    on, off = (
        create_webhook(url=url, event_types=["job.created"], secret="s", user=None)
        for url in ("https://a.example/on", "https://a.example/off")
    )
    Webhook.objects.filter(id=off.id).update(is_active=False)
    page = as_operator.get("/settings").content.decode()
    rows = re.findall(r'<li class="list-row webhook.*?</li>', page, re.S)
    shown = {row.split('<span class="mono">')[1].split("<")[0]: row for row in rows}
    assert "Disabled in the admin" in shown[off.url]
    assert "Disabled in the admin" not in shown[on.url]
