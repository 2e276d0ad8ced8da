"""A thread that takes slow side effects off the threads that commit.

A committed transition's subscribers (`jobs.notifier`) run on the thread that committed: a
request's, or the worker's completer. What they do that may be slow (publish to Redis, call
the application's signal receivers) is queued to a `Handoff` thread of its own, which
delivers what was queued, many items at a time, in the order they were queued. The queue is
bounded: a stalled consumer loses the overflow, with a warning, rather than grow the process
without end or block the committer. `flush()` waits for what was queued so far, at process
exit and in tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

Item = TypeVar("Item")


class Handoff(Generic[Item]):
    """One thread per process delivering queued items in order; see the module's doc."""

    THREAD_NAME = "handoff"
    MAX_QUEUED = 100_000  # items; beyond this, new ones are dropped
    MAX_PER_DELIVERY = 1_000
    # How long the first item of a delivery waits for others to join it (0: none).
    LINGER_SECONDS = 0.0
    # What is queued, in the log lines about it ("events").
    WHAT = "items"

    def __init__(self) -> None:
        self._start_empty()

    def _start_empty(self) -> None:
        self._ready = threading.Condition()
        self._queue: deque[Item] = deque()
        self._in_flight = 0
        self._dropped = 0
        self._thread: threading.Thread | None = None

    def deliver(self, items: Sequence[Item]) -> None:
        """Deliver up to `MAX_PER_DELIVERY` items, on the handoff thread."""
        raise NotImplementedError

    def delivered(self) -> None:
        """After each delivery, whether it raised or not."""

    def submit(self, items: Sequence[Item]) -> None:
        """Queue `items`; never blocks on the delivery, never raises."""
        if not items:
            return
        with self._ready:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name=self.THREAD_NAME, daemon=True
                )
                self._thread.start()
            if len(self._queue) + len(items) > self.MAX_QUEUED:
                self._dropped += len(items)
                return
            first = not self._queue
            self._queue.extend(items)
            if first:
                # The thread waits only for an empty queue: no wake-up per item.
                self._ready.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far was delivered (or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._ready:
            while self._queue or self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._ready.wait(remaining)
        return True

    def forget_parent(self) -> None:
        """In a forked child: the parent's thread, queue and lock are not ours to use."""
        self._start_empty()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                full = len(self._queue) >= self.MAX_PER_DELIVERY
            if self.LINGER_SECONDS and not full:
                time.sleep(self.LINGER_SECONDS)
            with self._ready:
                count = min(len(self._queue), self.MAX_PER_DELIVERY)
                items = [self._queue.popleft() for _ in range(count)]
                self._in_flight = count
                dropped, self._dropped = self._dropped, 0
            if dropped:
                logger.warning("%s queue full: %d %s dropped", self.THREAD_NAME, dropped, self.WHAT)
            try:
                self.deliver(items)
            except Exception:
                # Nothing may stop the thread: what comes next is still to be delivered.
                logger.exception("%s failed on %d %s", self.THREAD_NAME, count, self.WHAT)
            finally:
                self.delivered()
                with self._ready:
                    self._in_flight = 0
                    self._ready.notify_all()
