"""While PostgreSQL cannot be reached, the API answers 503 `unavailable` and the console a page
saying so, both with `Retry-After`; once it is back, everything answers as before.

The outage is real but private to this test: the test's database connection goes through the
fault suite's TCP proxy (`tests.faults.proxy`). Cut, it breaks the open connection and every
new one, as an unreachable server does, without touching the machine's PostgreSQL.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPMessage
from pathlib import Path
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client

from benchmarks.api_load import Daphne
from jobs.api.errors import RETRY_AFTER_SECONDS
from jobs.models import Job
from tests.conftest import subprocess_environment, token_client
from tests.faults.proxy import Proxy

from .test_job_routes import assert_error

JOBS = "/api/v1/jobs"


@pytest.fixture
def database_proxy(transactional_db: None) -> Iterator[Proxy]:
    """This test's database connection, through a proxy that the test may cut and restore."""
    settings_dict = connection.settings_dict
    original = settings_dict["HOST"], settings_dict["PORT"]
    proxy = Proxy((original[0] or "127.0.0.1", int(original[1] or 5432)))
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    try:
        yield proxy
    finally:
        connection.close()
        settings_dict["HOST"], settings_dict["PORT"] = original
        proxy.close()


def back_up(proxy: Proxy) -> None:
    proxy.restore()
    # Django's handler drops a connection that failed at the start of the next request; the
    # test client skips that step, so it is taken here.
    close_old_connections()


def assert_unavailable(response: Any) -> None:
    error = assert_error(response, 503, "unavailable")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["X-Request-ID"]
    assert "unreachable" in error["message"]


def test_api_answers_503_while_the_database_is_down_and_recovers(database_proxy, operator):
    client = token_client(operator)
    assert client.get(JOBS).status_code == 200

    database_proxy.cut()
    assert_unavailable(client.get(JOBS))
    assert_unavailable(client.get(f"{JOBS}/stats"))
    assert_unavailable(
        client.post(JOBS, {"type": "noop", "payload": {}, "priority": 2}, format="json")
    )
    assert_unavailable(client.get(f"{JOBS}/00000000-0000-0000-0000-000000000000"))
    health = client.get("/api/v1/health")
    assert health.status_code == 503
    assert health.json()["database"].startswith("unreachable")
    ready = client.get("/readyz")
    assert (ready.status_code, ready["Retry-After"]) == (503, str(RETRY_AFTER_SECONDS))
    assert ready.json()["status"] == "unready"
    assert ready.json()["error"]["code"] == "unavailable"
    assert client.get("/healthz").status_code == 200

    back_up(database_proxy)
    created = client.post(JOBS, {"type": "noop", "payload": {}, "priority": 2}, format="json")
    assert created.status_code == 201
    assert Job.objects.filter(id=created.json()["id"]).exists()


def test_console_shows_a_503_page_while_the_database_is_down(database_proxy, operator):
    browser = Client()
    browser.force_login(operator)
    assert browser.get("/jobs").status_code == 200

    database_proxy.cut()
    for response in (
        browser.get("/jobs"),
        browser.get("/"),
        browser.post("/jobs/new", {"type": "noop", "payload": "{}", "priority": "2"}),
    ):
        assert response.status_code == 503
        assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
        assert "cannot reach its database" in response.content.decode()

    back_up(database_proxy)
    assert browser.get("/jobs").status_code == 200


def timed_get(
    port: int, path: str, headers: dict[str, str] | None = None
) -> tuple[int, HTTPMessage, dict[str, Any], float]:
    """GET `path` from a server: status, headers, JSON body, and the seconds it took."""
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        body = json.loads(response.read())
        return response.status, response.headers, body, time.monotonic() - started
    except TimeoutError:
        pytest.fail(f"GET {path}: no answer within 30 s")
    finally:
        connection.close()


@pytest.mark.slow
def test_a_servers_probes_answer_promptly_while_its_pool_would_wait(
    database_proxy: Proxy, tmp_path: Path
) -> None:
    """A real server borrows its connections from a pool, where a request waits for one up to
    DATABASE_POOL_TIMEOUT, here a minute. A probe's caller gives up after a second or so
    (Kubernetes' default), and each probe held for the pool's wait would hold one of the
    server's request threads (as many as the pool's connections, here two) for as long."""
    env = {
        **subprocess_environment(),  # the database through the proxy
        "DATABASE_POOL_TIMEOUT": "60",
        "DATABASE_POOL_MAX_SIZE": "2",
    }
    server = Daphne(env, tmp_path / "daphne.log")
    try:
        assert timed_get(server.port, "/readyz")[0] == 200

        database_proxy.cut()
        # More probes at once than the server has request threads.
        paths = ["/readyz", "/readyz", "/readyz", "/api/v1/health"]
        with ThreadPoolExecutor(len(paths)) as clients:
            answers = list(clients.map(lambda path: timed_get(server.port, path), paths))
        for path, (status, headers, body, seconds) in zip(paths, answers, strict=True):
            assert (status, headers["Retry-After"]) == (503, str(RETRY_AFTER_SECONDS)), path
            assert headers["X-Request-ID"]
            assert body["error"]["code"] == "unavailable"
            assert body["database"].startswith("unreachable")
            assert body["error"]["details"]["database"] == [body["database"]]
            assert seconds < 15, f"{path} took {seconds:.1f} s"
        assert answers[0][2]["status"] == "unready"
        assert timed_get(server.port, "/healthz")[0] == 200

        back_up(database_proxy)
        deadline = time.monotonic() + 30
        while (ready := timed_get(server.port, "/readyz"))[0] != 200:
            assert time.monotonic() < deadline, f"still unready once the database is back: {ready}"
            time.sleep(0.5)
        assert ready[2] == {"status": "ready", "database": "ok", "redis": "ok"}
    finally:
        server.stop()


@pytest.mark.slow
def test_a_servers_metrics_answer_503_within_a_scrape_timeout_while_its_database_is_away(
    tmp_path: Path,
) -> None:
    """Prometheus gives a scrape 10 s by default (`scrape_timeout`), the pool's wait for a
    connection (DATABASE_POOL_TIMEOUT) while PostgreSQL is away: the scrape failed as a
    timeout, holding a request thread all along, where the probes answered within 1 s."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound and never listening: every connection refused
        env = {
            **subprocess_environment(),
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed.getsockname()[1]}/away",
            "DATABASE_POOL_TIMEOUT": "10",
        }
        server = Daphne(env, tmp_path / "daphne.log")
        try:
            scraper = {"Authorization": "Bearer jsk_a-viewers-token", "Accept": "text/plain"}
            status, headers, body, seconds = timed_get(server.port, "/metrics", scraper)
        finally:
            server.stop()
    assert (status, headers["Retry-After"]) == (503, str(RETRY_AFTER_SECONDS))
    assert body["error"]["code"] == "unavailable"
    assert "unreachable" in body["error"]["message"]
    assert seconds < 2, f"/metrics took {seconds:.1f} s"
