"""Over-long request lines under daphne get an answer in the error envelope, not a reset; under
daphne and the production server, that answer has a request id as every other has."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.api_load import Daphne, ProductionServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(subprocess_env: dict[str, str], tmp_path: Path) -> Iterator[Daphne]:
    daphne = Daphne(subprocess_env, tmp_path / "daphne.log")
    yield daphne
    daphne.stop()


def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, body


LONG_QUERY = b"GET /api/v1/jobs?type=" + b"x" * 20_000 + b" HTTP/1.1\r\nHost: a\r\n\r\n"
LONG_HEADER = b"GET /api/v1/jobs HTTP/1.1\r\nHost: a\r\nX-Big: " + b"y" * 20_000 + b"\r\n\r\n"
UNDER_LIMIT = (
    b"GET /api/v1/health?pad=" + b"z" * 15_000 + b" HTTP/1.1\r\n"
    b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n"
)


def test_an_over_long_line_is_answered_in_the_envelope(server: Daphne) -> None:
    for request, status in [(LONG_QUERY, 414), (LONG_HEADER, 431)]:
        answered, headers, body = exchange(server.port, request)
        assert answered == status
        assert headers["Content-Type"] == "application/json"
        error = json.loads(body)["error"]
        assert error["code"] == "request_too_large"
        assert "16384 bytes" in error["message"]

    assert exchange(server.port, UNDER_LIMIT)[0] == 200


@pytest.fixture(params=["daphne", "production"])
def either_server(
    request: pytest.FixtureRequest, subprocess_env: dict[str, str], tmp_path: Path
) -> Iterator[Daphne | ProductionServer]:
    """The development server or the production one: each answers these lines itself,
    before the application (and its request id middleware) sees a request."""
    log = tmp_path / f"{request.param}.log"
    server = (
        Daphne(subprocess_env, log)
        if request.param == "daphne"
        else ProductionServer(subprocess_env, log, workers=1)
    )
    yield server
    server.stop()


def test_an_over_long_line_is_answered_with_a_request_id_of_its_own(
    either_server: Daphne | ProductionServer,
) -> None:
    ids = [
        exchange(either_server.port, request)[1].get("X-Request-ID")
        for request in (LONG_QUERY, LONG_HEADER)
    ]
    # jobs.api.middleware's shape, and a fresh one each time.
    assert all(isinstance(id_, str) and re.fullmatch(r"[0-9a-f]{32}", id_) for id_ in ids), ids
    assert ids[0] != ids[1]
