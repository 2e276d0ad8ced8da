"""How every system's probe job says when its handler started: one Redis list per run.

The handler takes `time.time()` in its first line and pushes "<n> <time>"; the driver took
`time.time()` just before its enqueue call, so the difference is what a caller waits.
"""

from __future__ import annotations

from typing import Any

import redis

# Longer than any wait below (redis-py's own default is 5 s).
SOCKET_TIMEOUT = 150.0
_clients: dict[str, redis.Redis] = {}


def client(url: str) -> redis.Redis:
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(
            url, socket_timeout=SOCKET_TIMEOUT, decode_responses=True
        )
    return _clients[url]


def record_start(url: str, payload: dict[str, Any], started: float) -> None:
    client(url).rpush(payload["key"], f"{payload['n']} {started!r}")


def wait_start(url: str, key: str, timeout: float) -> tuple[int, float]:
    """The next start recorded on `key`: (n, time)."""
    popped = client(url).blpop([key], timeout=timeout)
    if popped is None:
        raise TimeoutError(f"no probe job started within {timeout:.0f} s")
    n, started = str(popped[1]).split()
    return int(n), float(started)
