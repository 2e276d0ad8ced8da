"""The README's first steps over real HTTP: make a token with the command, then use the API
through daphne (the production ASGI server) on a socket this test bound to a free port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs import state

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_enqueue_creates_a_pending_job_and_publishes_it(events):
    job = state.enqueue("noop", {}, priority=1)
    assert job["status"] == "pending"
    assert events.wait_for("job.created", lambda data: data["id"] == job["id"])


@pytest.fixture
def server(subprocess_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    log = tmp_path / "daphne.log"
    fd = str(listener.fileno())
    command = [sys.executable, "-m", "daphne", "--fd", fd, "scheduler_project.asgi:application"]
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=subprocess_env,
            pass_fds=[listener.fileno()],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    listener.close()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/v1/health", timeout=2).close()  # noqa: S310
                break
            except OSError:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "daphne did not answer within 30 s"
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def http(method: str, url: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method)  # noqa: S310 - http only
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, data=data, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


@pytest.mark.slow
def test_token_from_the_command_drives_the_api_over_http(server, subprocess_env):
    # As the README says to make one, beside `make run` or not, from a shell: not as a
    # sub-make of `make test`, which would print the directories it enters.
    shell = {k: v for k, v in subprocess_env.items() if k not in ("MAKELEVEL", "MAKEFLAGS")}
    made = subprocess.run(
        ["make", "manage", "ARGS=create_api_token smoke-ops --role operator"],
        cwd=ROOT,
        env=shell,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    token = made.stdout.strip()
    assert token.startswith("jsk_")

    assert http("GET", f"{server}/api/v1/health") == (200, {"database": "ok", "redis": "ok"})
    status, body = http("GET", f"{server}/api/v1/jobs")
    assert (status, body["error"]["code"]) == (401, "not_authenticated")

    job = {"type": "send_email", "payload": {"to": "a@example.com", "subject": "Hi"}, "priority": 1}
    status, created = http("POST", f"{server}/api/v1/jobs", token, job)
    assert status == 201, created
    status, fetched = http("GET", f"{server}/api/v1/jobs/{created['id']}", token)
    assert (status, fetched) == (200, created)
    status, page = http("GET", f"{server}/api/v1/jobs?status=pending&limit=5", token)
    assert status == 200
    assert [item["id"] for item in page["results"]] == [created["id"]]
    status, stats = http("GET", f"{server}/api/v1/jobs/stats", token)
    assert (status, stats["pending"], stats["total"]) == (200, 1, 1)
    status, cancelled = http("POST", f"{server}/api/v1/jobs/{created['id']}/cancel", token)
    assert (status, cancelled["status"]) == (200, "cancelled")
    status, body = http("POST", f"{server}/api/v1/jobs/{created['id']}/cancel", token)
    assert (status, body["error"]["details"]) == (409, {"status": "cancelled"})
    status, body = http("GET", f"{server}/api/v1/no-such-route", token)
    assert (status, body["error"]["code"]) == (404, "not_found")
