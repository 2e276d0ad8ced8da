"""The `/jobs/stats` counters and their `stats.updated` event, a subscriber of
`jobs.notifier` (`count_batch`).

API processes publish fresh counters after every committed change. The worker changes
thousands of jobs a second, so it turns on throttling and calls `flush()` from its loop:
at most one `stats.updated` per interval, and never a stale last one.
"""

import threading
import time

from django.db import connection

from .events import STATS_UPDATED, get_event_bus
from .notifier import Batch
from .sql import query


def current_stats() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(query("job_stats"))
        row = cursor.fetchone()
        assert row is not None  # noqa: S101 - an aggregate always returns one row
        columns = [column.name for column in cursor.description]
    return dict(zip(columns, (int(value) for value in row), strict=True))


class StatsPublisher:
    def __init__(self) -> None:
        self.min_interval = 0.0
        self._dirty = False
        self._last_published = 0.0
        self._lock = threading.Lock()

    def throttle(self, min_interval: float) -> None:
        self.min_interval = min_interval

    def changed(self) -> None:
        with self._lock:
            self._dirty = True
        self.flush()

    def flush(self) -> None:
        with self._lock:
            due = time.monotonic() - self._last_published >= self.min_interval
            if not (self._dirty and due):
                return
            self._dirty = False
            self._last_published = time.monotonic()
        get_event_bus().publish(STATS_UPDATED, current_stats())


stats_publisher = StatsPublisher()


def count_batch(batch: Batch) -> None:
    """The notifier's subscriber: fresh counters after a commit that moved them."""
    if batch.counts_changed:
        stats_publisher.changed()
