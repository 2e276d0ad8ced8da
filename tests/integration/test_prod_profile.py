"""`make prod` as a user meets it: the production profile started by its own command, then
driven over real HTTP (gunicorn with two uvicorn worker processes, DEBUG off): a console
login, a static file, an API write whose events reach an event stream, over-long request
lines answered in the error envelope, a worker that is restarted after a SIGTERM, and a stop
by Ctrl-C that finishes the request under way and logs no error."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler_project.devservices.processes import free_port
from tests.api.test_long_request_lines import LONG_HEADER, LONG_QUERY, exchange

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Profile:
    port: int
    admin: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_pid(self) -> int:
        found = re.findall(r"runworker \(pid (\d+)\)", self.log.read_text())
        return int(found[-1])

    def interrupt(self) -> None:
        """Ctrl-C, as an operator stops it."""
        self.process.send_signal(signal.SIGINT)

    def stopped(self) -> str:
        """Its whole output, once it has exited 0."""
        assert self.process.wait(timeout=60) == 0, self.log.read_text()
        return self.log.read_text()


@pytest.fixture
def profile(subprocess_env: dict[str, str], tmp_path: Path) -> Iterator[Profile]:
    data = tmp_path / "data"
    env = {
        **subprocess_env,
        "WEB_PORT": str(free_port()),
        "SCHEDULER_DATA_DIR": str(data),
        "WEB_CONCURRENCY": "2",
        "SECRET_KEY": "prod-profile-test-" + "k" * 40,
    }
    env.pop("DEBUG", None)
    log = tmp_path / "make-prod.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler_project.devservices", "prod"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while "production profile" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        admin = json.loads((data / "dev-admin.json").read_text())
        profile = Profile(int(env["WEB_PORT"]), admin, log, process)
        yield profile
        if process.poll() is None:
            profile.interrupt()
            profile.stopped()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def read_event(stream: http.client.HTTPResponse) -> tuple[str, dict[str, object]]:
    name = ""
    while line := stream.fp.readline():
        text = line.decode().rstrip("\n")
        if text.startswith("event: "):
            name = text.removeprefix("event: ")
        elif text.startswith("data: ") and name:
            return name, json.loads(text.removeprefix("data: "))
    raise AssertionError("the stream ended")


def test_make_prod_serves_the_console_the_api_events_and_static_files_then_stops_cleanly(
    profile: Profile,
) -> None:
    # A worker told to stop (as a deploy does) finishes, and its supervisor starts another.
    first_worker = profile.worker_pid()
    os.kill(first_worker, signal.SIGTERM)

    # Console login through the form, CSRF included.
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with browser.open(f"{profile.base}/accounts/login/", timeout=30) as response:
        login_page = response.read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page)
    assert csrf
    form = {
        "csrfmiddlewaretoken": csrf.group(1),
        "username": profile.admin["username"],
        "password": profile.admin["password"],
    }
    with browser.open(
        f"{profile.base}/accounts/login/", urllib.parse.urlencode(form).encode(), timeout=30
    ) as dashboard:
        assert (dashboard.status, urllib.parse.urlsplit(dashboard.url).path) == (200, "/")
        page = dashboard.read().decode()
    assert profile.admin["username"] in page

    # The page names its stylesheet by content hash; WhiteNoise serves it for a year.
    stylesheet = re.search(r'href="(/static/console/console\.[0-9a-f]{12}\.css)"', page)
    assert stylesheet, page
    with browser.open(profile.base + stylesheet.group(1), timeout=30) as css:
        assert css.headers["Content-Type"].startswith("text/css")
        assert "immutable" in css.headers["Cache-Control"]
        assert b"{" in css.read()

    for request, status in [(LONG_QUERY, 414), (LONG_HEADER, 431)]:
        answered, headers, body = exchange(profile.port, request)
        assert (answered, headers["Content-Type"]) == (status, "application/json")
        assert json.loads(body)["error"]["code"] == "request_too_large"

    # An event stream, then a job through the API: the stream sees it created and completed
    # (by the restarted worker, another process: the events cross through Redis).
    token = profile.admin["token"]
    auth = {"Authorization": f"Bearer {token}"}
    stream_connection = http.client.HTTPConnection("127.0.0.1", profile.port, timeout=60)
    stream_connection.request("GET", "/api/v1/jobs/stream", headers=auth)
    stream = stream_connection.getresponse()
    assert stream.status == 200
    assert read_event(stream)[0] == "stats.updated"

    api = http.client.HTTPConnection("127.0.0.1", profile.port, timeout=30)
    noop = json.dumps({"type": "noop", "payload": {}, "priority": 1}).encode()
    api.request("POST", "/api/v1/jobs", noop, {**auth, "Content-Type": "application/json"})
    created = api.getresponse()
    assert created.status == 201
    job_id = json.loads(created.read())["id"]
    api.close()

    seen: set[str] = set()
    while not {"job.created", "job.completed"} <= seen:
        name, data = read_event(stream)
        if data.get("id") == job_id:
            seen.add(name)
    stream_connection.close()
    assert profile.worker_pid() != first_worker

    # Ctrl-C with a request under way: the server has its head (it asked for the body with
    # "100 Continue"), and the body comes only once both web processes are stopping.
    late = http.client.HTTPConnection("127.0.0.1", profile.port, timeout=30)
    late.putrequest("POST", "/api/v1/jobs")
    for name, value in {
        **auth,
        "Content-Type": "application/json",
        "Content-Length": str(len(noop)),
        "Expect": "100-continue",
    }.items():
        late.putheader(name, value)
    late.endheaders()
    assert late.sock.recv(12, socket.MSG_PEEK | socket.MSG_WAITALL) == b"HTTP/1.1 100"
    before = len(profile.log.read_text())
    profile.interrupt()
    deadline = time.monotonic() + 30
    while len(re.findall(r"\] Shutting down\n", profile.log.read_text()[before:])) < 2:
        assert time.monotonic() < deadline, profile.log.read_text()
        time.sleep(0.1)
    late.send(noop)
    answer = late.getresponse()  # skips the "100 Continue"
    assert answer.status == 201, answer.read()
    assert json.loads(answer.read())["type"] == "noop"
    late.close()

    # A clean stop, the worker restarted above included, is no error for the operator.
    output = profile.stopped()
    served = output[output.index("Starting gunicorn") :].splitlines()
    errors = [line for line in served if re.search("error|traceback|exception", line, re.I)]
    assert errors == [], output
