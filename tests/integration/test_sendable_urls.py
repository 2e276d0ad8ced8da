"""URLs beyond ASCII (IRIs): `http_request` jobs and webhooks take them and send them
encoded, and refuse, when they are written, what no request could carry.

The hosts here resolve without a network: `localhost` or `127.0.0.1` written in full-width
forms (U+FF01..U+FF5E) are those once IDNA has mapped them."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs import state, webhooks
from jobs.models import Job, JobAttempt, JobStatus, Webhook
from tests.console.test_webhooks import Receiver, verify
from worker.worker import Worker

with_worker = pytest.mark.django_db(transaction=True)

BIDI_OVERRIDE = "\u202e"
# The probe's webhook: it reads "https://例え.テスト/live" but is not that URL.
DISGUISED = f"https://例え.テスト/{BIDI_OVERRIDE}evil"


def full_width(ascii_text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) for c in ascii_text)


LOCALHOST = full_width("localhost")


pytestmark = pytest.mark.usefixtures("fresh_webhook_cache")


def port_of(receiver: Receiver) -> int:
    return int(receiver.server.server_address[1])


def run_once() -> None:
    assert Worker(once=True).run() == 0


def url_errors(url: str) -> list[str]:
    return webhooks.validate(url, ["job.created"], "s").get("url", [])


# --- http_request jobs -----------------------------------------------------------------------


@with_worker
def test_an_http_request_to_an_iri_reaches_its_host_and_path_encoded(receiver: Receiver) -> None:
    url = f"http://{LOCALHOST}:{port_of(receiver)}/café?q=ü&kept=%2F"
    job = state.enqueue("http_request", {"url": url, "json": {"a": 1}}, max_retries=1)
    run_once()

    done = Job.objects.get(id=job["id"])
    assert done.status == JobStatus.COMPLETED, done.last_error
    (request,) = receiver.requests
    assert request["path"] == "/caf%C3%A9?q=%C3%BC&kept=%2F"
    assert request["headers"]["Host"] == f"localhost:{port_of(receiver)}"


@pytest.mark.django_db
def test_the_api_refuses_an_http_request_to_a_url_disguised_by_a_bidi_override(
    operator_client: APIClient,
) -> None:
    def create(url: str) -> Any:
        body = {"type": "http_request", "payload": {"url": url}, "priority": 2}
        return operator_client.post("/api/v1/jobs", body, format="json")

    refused = create(DISGUISED)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "validation_error"
    (message,) = refused.json()["error"]["details"]["payload.url"]
    assert "U+202E" in message and "%-encode" in message
    assert not Job.objects.exists()

    assert create("https://例え.テスト/パス").status_code == 201


@with_worker
@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://¼.example/hook", "'¼.example' is not a name IDNA can encode"),
        ("http://exa<mple.com/hook", "'exa<mple.com' holds '<', which no host name can"),
    ],
)
def test_an_http_request_stored_to_a_host_no_request_can_reach_fails_saying_why(
    url: str, named: str
) -> None:
    # Refused when created now (tests/api/test_http_request_url_host.py), but a job stored
    # before may hold one.
    job = state.enqueue("http_request", {"url": "http://example.com/hook"}, max_retries=1)
    Job.objects.filter(id=job["id"]).update(payload={"url": url})
    run_once()

    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert attempt.error_type == "HandlerFailure"
    assert attempt.error_message.startswith(f"{url} cannot be sent: Its host {named}")


@with_worker
def test_an_encoded_host_is_held_to_the_outbound_guard(receiver: Receiver, settings: Any) -> None:
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    job = state.enqueue(
        "http_request", {"url": f"http://{LOCALHOST}:{port_of(receiver)}/"}, max_retries=1
    )
    run_once()

    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert "OUTBOUND_ALLOWED_NETWORKS" in attempt.error_message
    assert receiver.requests == []


# --- webhooks --------------------------------------------------------------------------------


@with_worker
def test_a_webhook_to_an_iri_is_delivered_signed(receiver: Receiver) -> None:
    url = f"http://127.0.0.1:{port_of(receiver)}/hooks/café"
    hook = webhooks.create_webhook(url=url, event_types=["job.created"], secret="s", user=None)
    assert hook.url == url  # kept as written: encoded when sent
    state.enqueue("noop", {}, priority=2)
    run_once()

    (request,) = receiver.requests
    assert request["path"] == "/hooks/caf%C3%A9"
    assert verify(request, "s")["type"] == "job.created"
    assert not Job.objects.filter(in_dlq=True).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            DISGUISED,
            "Must not hold U+202E RIGHT-TO-LEFT OVERRIDE (character 16): spaces, control "
            "characters and invisible formatting characters cannot be sent as they are; "
            "%-encode them in the path or query.",
        ),
        (
            "https://exa\u200bmple.com/hook",
            "Must not hold U+200B ZERO WIDTH SPACE (character 12): spaces, control characters "
            "and invisible formatting characters cannot be sent as they are; %-encode them in "
            "the path or query.",
        ),
        (
            'http://exa"mple.com/hook',
            "Its host 'exa\"mple.com' holds '\"', which no host name can.",
        ),
        ("http://exa<mple.com/hook", "Its host 'exa<mple.com' holds '<', which no host name can."),
        (
            "https://¼.example/hook",
            "Its host '¼.example' is not a name IDNA can encode: Codepoint U+2044 at position 2 "
            "of '1\N{FRACTION SLASH}4' not allowed.",
        ),
        ("https://hooks..example.com/h", "Its host 'hooks..example.com' has an empty label."),
        ("https:///hook", "Names no host after https://."),
        # Taken, then every delivery was refused ("Connection refused") for a day.
        (
            "http://127.0.0.1:0/hook",
            "Its port 0 is no port a request can reach: use 1 to 65535, or leave it out for "
            "the scheme's default.",
        ),
        (
            "https://hooks.example.com:65536/h",
            "Its port 65536 is no port a request can reach: use 1 to 65535, or leave it out "
            "for the scheme's default.",
        ),
    ],
)
def test_a_webhook_url_no_request_can_carry_is_refused_naming_the_problem(
    url: str, message: str
) -> None:
    assert url_errors(url) == [message]
    with pytest.raises(state.JobValidationError):
        webhooks.create_webhook(url=url, event_types=["job.created"], secret="s", user=None)
    assert not Webhook.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    ["https://例え.テスト/パス?q=ü", "https://faß.de/hook", "http://receiver:8080/hook"],
)
def test_a_webhook_url_a_request_can_carry_is_taken(url: str) -> None:
    assert url_errors(url) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url", [f"http://{full_width('127.0.0.1')}/hook", f"http://{LOCALHOST}:8000/hook"]
)
def test_a_webhook_to_an_internal_address_written_in_full_width_is_refused(url: str) -> None:
    (message,) = url_errors(url)
    assert message.startswith("Not allowed: 127.0.0.1 is a loopback")
    assert "OUTBOUND_ALLOWED_NETWORKS" in message
