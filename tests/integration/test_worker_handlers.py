"""The built-in handlers, run by a real worker loop (in this process, `--once` style)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail

from jobs import state
from jobs.models import Job, JobAttempt, JobLog
from worker.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


def run_once(**options: Any) -> None:
    assert Worker(once=True, **options).run() == 0


def finished(job: dict[str, Any]) -> tuple[Job, list[JobAttempt]]:
    return Job.objects.get(id=job["id"]), list(JobAttempt.objects.filter(job_id=job["id"]))


class Recorder(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []
    # Set once `/drip` has sent its whole answer.
    drip_sent = threading.Event()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        self.requests.append({"method": self.command, "path": self.path, "body": body})
        if self.path.startswith("/slow"):
            time.sleep(2)
        if self.path.startswith("/drip"):
            self._drip(b"x" * 50, every=0.1)
            return
        status = int(self.path.rsplit("/", 1)[-1]) if self.path.startswith("/status/") else 200
        self.send_response(status)
        if retry_after := self.headers.get("X-Answer-Retry-After"):
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        binary = self.path.startswith("/binary")
        self.wfile.write(b"\x00\x01 binary" if binary else b"hello from the test server")

    def _drip(self, answer: bytes, every: float) -> None:
        """A byte at a time: each read gets one well within a per-read timeout."""
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        for byte in answer:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(every)
        Recorder.drip_sent.set()

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_server(settings: Any) -> Iterator[str]:
    # This test's own server, on loopback: allowed by name, as a deployment would.
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    Recorder.requests = []
    Recorder.drip_sent.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_send_email_goes_through_the_django_email_backend():
    job = state.enqueue(
        "send_email",
        {"to": "ada@example.com", "subject": "Report ready", "html": "<p>Done</p>"},
    )
    run_once()

    done, _ = finished(job)
    assert done.status == "completed"
    assert done.result == {"sent": 1, "to": "ada@example.com"}
    (message,) = mail.outbox
    assert (message.subject, message.to) == ("Report ready", ["ada@example.com"])
    assert message.alternatives[0][0] == "<p>Done</p>"
    assert JobLog.objects.filter(job_id=job["id"], message__contains="ada@example.com").exists()


def test_http_request_posts_json_and_stores_the_answer(http_server):
    job = state.enqueue(
        "http_request", {"method": "POST", "url": f"{http_server}/hook", "json": {"a": 1}}
    )
    run_once()

    done, _ = finished(job)
    assert done.status == "completed"
    assert done.result == {"status": 200, "body": "hello from the test server"}
    assert Recorder.requests == [{"method": "POST", "path": "/hook", "body": '{"a": 1}'}]


def test_http_request_to_a_receiver_answering_binary_succeeds_with_the_body_escaped(
    http_server,
):
    job = state.enqueue("http_request", {"method": "GET", "url": f"{http_server}/binary"})
    run_once()

    done, _ = finished(job)
    assert done.status == "completed"
    assert done.result == {"status": 200, "body": "\\u0000\x01 binary"}


def test_http_request_non_2xx_fails_the_attempt(http_server):
    job = state.enqueue(
        "http_request", {"method": "GET", "url": f"{http_server}/status/503"}, max_retries=1
    )
    run_once()

    done, (attempt,) = finished(job)
    assert done.in_dlq
    assert attempt.error_type == "HandlerFailure"
    assert "503" in attempt.error_message


@pytest.mark.parametrize(
    ("status", "header", "waits"),
    [(429, "30", 30.0), (503, "7", 7.0), (429, "in a while", None), (500, "30", None)],
)
def test_http_request_told_to_retry_after_waits_that_long(http_server, status, header, waits):
    job = state.enqueue(
        "http_request",
        {
            "method": "GET",
            "url": f"{http_server}/status/{status}",
            "headers": {"X-Answer-Retry-After": header},
        },
    )
    run_once()

    failed, (attempt,) = finished(job)
    assert failed.status == "failed" and str(status) in attempt.error_message
    waited = (failed.next_retry_at - attempt.finished_at).total_seconds()
    if waits is None:  # not a Retry-After this handler follows: the backoff's first wait
        assert attempt.error_type == "HandlerFailure"
        assert waited <= 1.2
    else:
        assert attempt.error_type == "RetryAfter"
        assert f"tried again in {waits:g} s" in attempt.error_message
        assert waited == waits


def test_a_retry_after_shorter_than_the_backoff_waits_the_backoff(http_server):
    # A receiver behind a deploy's load balancer answers 503 "in 1 s" at every attempt: a
    # webhook's nine attempts, meant to span a day, went by in eight seconds into the DLQ.
    job = state.enqueue(
        "http_request",
        {
            "method": "GET",
            "url": f"{http_server}/status/503",
            "headers": {"X-Answer-Retry-After": "1"},
        },
        max_retries=9,
    )
    Job.objects.filter(id=job["id"]).update(attempt_count=3)  # its fourth attempt next
    run_once()

    failed, (attempt,) = finished(job)
    waited = (failed.next_retry_at - attempt.finished_at).total_seconds()
    assert 0.8 * 5**3 <= waited <= 1.2 * 5**3  # the fourth attempt's backoff, not 1 s
    assert attempt.error_type == "RetryAfter"
    assert "it asked to be tried again in 1 s" in attempt.error_message


def test_http_request_timeout_fails_the_attempt(http_server):
    job = state.enqueue(
        "http_request",
        {"method": "GET", "url": f"{http_server}/slow", "timeout": 0.3},
        max_retries=1,
    )
    started = time.monotonic()
    run_once()

    assert time.monotonic() - started < 2
    done, (attempt,) = finished(job)
    assert done.in_dlq
    assert "timed out" in attempt.error_message


def test_http_request_timeout_bounds_the_whole_answer_not_each_read(http_server):
    job = state.enqueue(
        "http_request",
        {"method": "GET", "url": f"{http_server}/drip", "timeout": 0.5},
        max_retries=1,
    )
    run_once()

    done, (attempt,) = finished(job)
    assert done.in_dlq
    assert attempt.error_type == "TimeoutError"
    assert "no complete answer within 0.5 s" in attempt.error_message
    # Given up while the receiver was still sending (5 s in all).
    assert not Recorder.drip_sent.is_set()


def test_generate_report_noop_and_flaky_return_their_results():
    report = state.enqueue("generate_report", {"report": "sales", "rows": 5000, "format": "csv"})
    noop = state.enqueue("noop", {})
    survivor = state.enqueue("flaky", {"failure_probability": 0})
    run_once(scheduler="skiplist")

    done, _ = finished(report)
    assert done.result["report"] == "sales" and done.result["rows"] == 5000
    assert 0.4 < done.result["mean"] < 0.6
    assert finished(noop)[0].status == "completed" and finished(noop)[0].result is None
    assert finished(survivor)[0].result == {"survived": True}
