"""A body sent in chunks (HTTP/1.1 `Transfer-Encoding: chunked`, no `Content-Length`), as
clients streaming a body they did not measure send it, through the project's ASGI
application as the servers hand it over."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jobs.api.auth import issue_token
from jobs.models import Job
from scheduler_project.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator_token(operator: Any) -> str:
    return issue_token(operator)


def post_in_chunks(token: str, chunks: list[bytes]) -> tuple[int, Any]:
    """POST /api/v1/jobs with `chunks` as the body's parts and no Content-Length."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/jobs",
        "raw_path": b"/api/v1/jobs",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"transfer-encoding", b"chunked"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    parts = [
        {"type": "http.request", "body": chunk, "more_body": n < len(chunks) - 1}
        for n, chunk in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return parts.pop(0) if parts else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body)


def test_a_job_sent_in_chunks_is_created(operator_token):
    # DRF takes a request without Content-Length for one without a body: the job was refused
    # with "This field is required." for each of its fields.
    body = json.dumps({"type": "noop", "payload": {}, "priority": 1}).encode()
    status, answer = post_in_chunks(operator_token, [body[:10], body[10:]])
    assert status == 201, answer
    assert Job.objects.filter(id=answer["id"]).exists()


def test_a_body_sent_in_chunks_past_the_limit_is_413(operator_token, settings):
    settings.API_MAX_BODY_BYTES = 100
    body = json.dumps({"type": "noop", "payload": {"x": "y" * 200}, "priority": 1}).encode()
    status, answer = post_in_chunks(operator_token, [body[:50], body[50:]])
    assert (status, answer["error"]["code"]) == (413, "payload_too_large")
    assert not Job.objects.exists()
