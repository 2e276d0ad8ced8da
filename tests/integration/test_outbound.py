"""http_request jobs and webhooks stay off internal networks unless allowed in settings;
the address checked is the one connected to, so names and redirects cannot sneak past."""

from __future__ import annotations

import ipaddress
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
