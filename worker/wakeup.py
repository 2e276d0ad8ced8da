"""Wake-up: PostgreSQL LISTEN on the channel that `jobs.state` notifies when a job becomes
runnable (created, retried from the DLQ, released by its dependency, rescued) or is
cancelled.

NOTIFY is delivered at commit, so a worker never hears of a job it cannot see yet, and a
rolled-back enqueue wakes nobody. The listener runs on its own thread and connection and
posts each payload to the worker's inbox; after every (re)connect it also posts a "feed"
request, because whatever was notified while it was away is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from queue import SimpleQueue
from typing import Any

import psycopg
from django.db import connection
from psycopg import sql

from jobs.reconnect import Backoff

from .threads import loop_thread

logger = logging.getLogger(__name__)


def connection_params() -> dict[str, Any]:
    """psycopg connect() arguments for the database Django uses: DATABASE_URL's parameters
    (TLS, timeouts, keepalives) and all, under a name of its own."""
    return {**connection.get_connection_params(), "application_name": "scheduler-worker-listen"}


class Listener:
    """LISTEN `channel` and post ("notify", payload) and ("feed", listening_since) to `inbox`
    (`listening_since`: `time.monotonic()` once the LISTEN is in effect)."""

    POLL_SECONDS = 0.5

    def __init__(self, channel: str, inbox: SimpleQueue[Any]) -> None:
        self.channel = channel
        self._inbox = inbox
        self._params = connection_params()
        self._stop = threading.Event()
        self._thread = loop_thread(self._run, "listener", inbox)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self.POLL_SECONDS)

    def _run(self) -> None:
        backoff = Backoff(0.5, 10.0)
        while not self._stop.is_set():
            try:
                with psycopg.connect(**self._params, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._inbox.put(("feed", time.monotonic()))
                    backoff.succeeded()
                    while not self._stop.is_set():
                        for notify in conn.notifies(timeout=self.POLL_SECONDS):
                            self._inbox.put(("notify", notify.payload))
            except psycopg.Error as exc:
                wait = backoff.failed()
                logger.warning(
                    "wake-up listener lost its connection, retrying in %.1f s: %s", wait, exc
                )
                self._stop.wait(wait)
