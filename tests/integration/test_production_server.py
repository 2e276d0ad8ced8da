"""The production server's protocol (`scheduler_project.server`) with a real client."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from benchmarks.api_load import ProductionServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_pipelined_requests_are_answered_in_the_order_they_were_sent(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    """Requests sent back to back on one connection wait in the protocol's pipeline (a list
    standing in for uvicorn's deque) and come back in order."""
    server = ProductionServer(subprocess_env, tmp_path / "gunicorn.log", workers=1)
    paths = ["/api/v1/health", "/nowhere-1", "/api/v1/health", "/nowhere-2"]
    requests = b"".join(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode() for path in paths
    )
    requests += b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(requests)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
    finally:
        server.stop()

    statuses = [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", received)]
    assert statuses == [200, 404, 200, 404, 200]


def test_the_log_names_the_address_the_server_listens_on(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    """Each worker binds the address itself (`reuse_port`), so gunicorn's master, which holds
    no socket, logged "Listening at:  (pid)": nothing an operator could read."""
    server = ProductionServer(subprocess_env, tmp_path / "gunicorn.log", workers=2)
    server.stop()
    said = server.log()
    assert re.search(
        rf"\[INFO\] Listening at: http://127\.0\.0\.1:{server.port} \(\d+\)\n", said
    ), said
