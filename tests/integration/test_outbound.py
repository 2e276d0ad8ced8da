"""http_request jobs and webhooks stay off internal networks unless allowed in settings;
the address checked is the one connected to, so names and redirects cannot sneak past."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobs import state
from jobs.models import Job, JobAttempt
from jobs.outbound import refusal
from jobs.webhooks import validate
from worker.worker import Worker

# The worker runs in this process: its transitions commit, so those tests need a real
# transaction; the address rules themselves need no database.
with_worker = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # cloud metadata
        ("100.64.0.1", True),  # carrier-grade NAT
        ("0.0.0.0", True),  # noqa: S104
        ("::1", True),
        ("fe80::1", True),
        ("fd00::1", True),
        ("::ffff:127.0.0.1", True),
        ("93.184.216.34", False),
        ("2606:4700:4700::1111", False),
    ],
)
def test_only_public_addresses_by_default(address: str, refused: bool) -> None:
    assert (refusal(ipaddress.ip_address(address)) is not None) is refused


def test_allowed_networks_let_their_addresses_through(settings: Any) -> None:
    settings.OUTBOUND_ALLOWED_NETWORKS = ["10.20.0.0/16", "::1/128"]
    assert refusal(ipaddress.ip_address("10.20.3.4")) is None
    assert refusal(ipaddress.ip_address("::1")) is None
    assert refusal(ipaddress.ip_address("10.21.0.1")) is not None


class Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        Recorder.hits.append(self.path)
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/redirect/"))
        else:
            self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def local_port() -> Iterator[int]:
    Recorder.hits = []
    server = ThreadingHTTPServer(("0.0.0.0", 0), Recorder)  # noqa: S104 - 127.0.0.2 too
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def run(url: str) -> tuple[Job, list[JobAttempt]]:
    job = state.enqueue("http_request", {"method": "GET", "url": url}, max_retries=1)
    assert Worker(once=True).run() == 0
    return Job.objects.get(id=job["id"]), list(JobAttempt.objects.filter(job_id=job["id"]))


@with_worker
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_target_is_refused_by_address_or_by_name(local_port: int, host: str) -> None:
    job, (attempt,) = run(f"http://{host}:{local_port}/secret")
    assert job.status != "completed"
    assert "loopback, private, link-local" in attempt.error_message
    assert "OUTBOUND_ALLOWED_NETWORKS" in attempt.error_message
    assert Recorder.hits == []


@with_worker
def test_an_allowed_target_is_reached_but_not_a_redirect_elsewhere(
    local_port: int, settings: Any
) -> None:
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    job, _ = run(f"http://127.0.0.1:{local_port}/fine")
    assert job.status == "completed"
    assert Recorder.hits == ["/fine"]

    elsewhere = f"http://127.0.0.2:{local_port}/inside"
    job, (attempt,) = run(f"http://127.0.0.1:{local_port}/redirect/{elsewhere}")
    assert job.status != "completed"
    assert "127.0.0.2" in attempt.error_message
    assert Recorder.hits == ["/fine", f"/redirect/{elsewhere}"]


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/hook", "http://localhost:8000/hook", "http://[::1]/h", "http://10.0.0.5/h"],
)
def test_a_webhook_to_an_internal_address_is_refused_unless_allowed(
    url: str, settings: Any
) -> None:
    errors = validate(url, ["job.completed"], "secret")
    assert "OUTBOUND_ALLOWED_NETWORKS" in errors["url"][0]
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128", "10.0.0.0/8"]
    assert validate(url, ["job.completed"], "secret") == {}
    assert validate("https://hooks.example.com/x", ["job.completed"], "secret") == {}


class Redirecting(BaseHTTPRequestHandler):
    """`/from/<status>` answers that status with the Location in the `X-Location` header
    (or `/to`); every request is recorded with its headers."""

    requests: list[tuple[str, str, dict[str, str]]] = []

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Redirecting.requests.append((self.command, self.path, dict(self.headers.items())))
        if self.path.startswith("/from/"):
            self.send_response(int(self.path.rsplit("/", 1)[-1]))
            self.send_header("Location", self.headers.get("X-Location", "/to"))
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def redirecting(settings: Any) -> Iterator[str]:
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    Redirecting.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@with_worker
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_fails_the_attempt_naming_where_it_points(
    redirecting: str, status: int
) -> None:
    # A signed webhook delivery: followed, 301-303 became a GET without the body, carrying
    # the signature headers to whatever Location named, and completed on its 200.
    signed = {
        "X-Scheduler-Event": "job.completed",
        "X-Scheduler-Signature": "sha256=abc",
        "X-Location": f"{redirecting}/to",
    }
    job = state.enqueue(
        "http_request",
        {"url": f"{redirecting}/from/{status}", "headers": signed, "body": "{}"},
        max_retries=2,
    )
    assert Worker(once=True).run() == 0

    failed = Job.objects.get(id=job["id"])
    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert [(method, path) for method, path, _ in Redirecting.requests] == [
        ("POST", f"/from/{status}")
    ]
    # Retried as any failure is, and the message says where the URL points now.
    assert failed.status == "failed" and not failed.in_dlq and failed.next_retry_at
    assert attempt.error_type == "HandlerFailure"
    assert f"answered {status} " in attempt.error_message
    assert f"{redirecting}/to" in attempt.error_message
    assert "redirects are not followed" in attempt.error_message


@with_worker
def test_a_relative_location_is_named_in_full(redirecting: str) -> None:
    job = state.enqueue(
        "http_request",
        {"method": "GET", "url": f"{redirecting}/from/301", "headers": {"X-Location": "moved"}},
        max_retries=1,
    )
    assert Worker(once=True).run() == 0

    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert f"{redirecting}/from/moved" in attempt.error_message
    assert len(Redirecting.requests) == 1


@with_worker
def test_a_redirect_to_ftp_connects_nowhere(redirecting: str) -> None:
    # urllib follows a redirect to ftp:// with its own FTP handler, whose connection the
    # guard never sees: 127.0.0.2 is not in OUTBOUND_ALLOWED_NETWORKS.
    with socket.create_server(("127.0.0.2", 0)) as inside:
        target = f"ftp://127.0.0.2:{inside.getsockname()[1]}/etc/passwd"
        job = state.enqueue(
            "http_request",
            {
                "method": "GET",
                "url": f"{redirecting}/from/302",
                "headers": {"X-Location": target},
                "timeout": 1,
            },
            max_retries=1,
        )
        assert Worker(once=True).run() == 0

        inside.setblocking(False)
        with pytest.raises(BlockingIOError):
            inside.accept()  # nobody knocked
    (attempt,) = JobAttempt.objects.filter(job_id=job["id"])
    assert "answered 302 " in attempt.error_message and target in attempt.error_message
