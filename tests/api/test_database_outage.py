"""While PostgreSQL cannot be reached, the API answers 503 `unavailable` and the console a page
saying so, both with `Retry-After`; once it is back, everything answers as before.

The outage is real but private to this test: the test's database connection goes through a
TCP proxy the test controls. Stopping the proxy cuts the open connection and refuses new ones,
as a stopped server does, without touching the machine's PostgreSQL.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client

from jobs.api.errors import RETRY_AFTER_SECONDS
from jobs.models import Job
from tests.conftest import token_client

from .test_job_routes import assert_error

JOBS = "/api/v1/jobs"


class TcpProxy:
    """Forwards a local port to `upstream` while running; `stop()` closes every socket."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self._sockets: list[socket.socket] = []
        self._running = False
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._running = True
        self._track(listener)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        with self._lock:
            self._running = False
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def _track(self, sock: socket.socket) -> bool:
        """Keep `sock` for `stop()` to close; a socket opened while `stop()` ran (a
        connection accepted just before its listener closed) is closed at once, not left
        open for the garbage collector to find in a later test."""
        with self._lock:
            if self._running:
                self._sockets.append(sock)
                return True
        _close(sock)
        return False

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if not self._track(client):
                return
            upstream = socket.create_connection(self.upstream)
            if not self._track(upstream):
                return
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@pytest.fixture
def database_proxy(transactional_db: None) -> Iterator[TcpProxy]:
    """This test's database connection, through a proxy that the test may stop and restart."""
    settings_dict = connection.settings_dict
    original = settings_dict["HOST"], settings_dict["PORT"]
    proxy = TcpProxy((original[0] or "127.0.0.1", int(original[1] or 5432)))
    proxy.start()
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    try:
        yield proxy
    finally:
        connection.close()
        settings_dict["HOST"], settings_dict["PORT"] = original
        proxy.stop()


def back_up(proxy: TcpProxy) -> None:
    proxy.start()
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

    database_proxy.stop()
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

    database_proxy.stop()
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
