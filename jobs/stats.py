"""The `/jobs/stats` counters and their `stats.updated` event, a subscriber of
`jobs.notifier` (`count_batch`).

The counters are kept by the database in the transaction of every change to `jobs`
(`job_counts` in `schema.sql`), so reading them costs the same at ten jobs or ten million
and never scans `jobs`. A worker folds them every second (`worker.maintenance.CountFold`);
a reader folds them too when it finds many rows, so a read stays small with no worker up.

API processes publish fresh counters after every committed change. The worker changes
thousands of jobs a second, so it turns on throttling and calls `flush()` from its loop:
at most one `stats.updated` per interval, and never a stale last one.
"""

import threading
import time

from .events import STATS_UPDATED, background_publisher
from .notifier import Batch
from .sql import fetch

# The counters of `/jobs/stats`, in the order the API shows them (`total` is their sum).
COUNTERS = ("pending", "processing", "completed", "failed", "dlq", "cancelled")
# A reader that sums more rows than this folds them: about 1 ms of summing.
_FOLD_ABOVE = 2_000


def current_stats() -> dict[str, int]:
    """The exact counters as of now: `failed` is only jobs waiting for a retry."""
    stats = dict.fromkeys(COUNTERS, 0)
    summed = 0
    for row in fetch("job_stats", {}):
        stats[row["key"]] = int(row["n"])
        summed += row["summed"]
    if summed > _FOLD_ABOVE:
        fold_counts()
    return {**stats, "total": sum(stats.values())}


def fold_counts() -> int:
    """Collapse the counters' appended rows into one per counter; how many were folded."""
    return int(fetch("fold_job_counts", {})[0]["folded"])


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
        # Queued behind the events of the commit that moved them, in one Redis command.
        background_publisher.submit([(STATS_UPDATED, current_stats())])


stats_publisher = StatsPublisher()


def count_batch(batch: Batch) -> None:
    """The notifier's subscriber: fresh counters after a commit that moved them."""
    if batch.counts_changed:
        stats_publisher.changed()
