"""The `/jobs/stats` counters and their `stats.updated` event, a subscriber of
`jobs.notifier` (`count_batch`).

The counters are kept by the database in the transaction of every change to `jobs`
(`job_counts` in `schema.sql`), so reading them costs the same at ten jobs or ten million
and never scans `jobs`. A worker folds them every second (`worker.maintenance.CountFold`);
a reader folds them too when it finds many rows, so a read stays small with no worker up.

`stats.updated` is coalesced: a commit that moved the counters only marks them changed, and
one thread per process reads them and publishes at most once per `SCHEDULER_STATS_INTERVAL`
(the trailing change included), so no enqueue or completion pays for the read, whatever
the rate of changes.
"""

import logging
import os
import threading
import time
from datetime import date, datetime, timedelta, tzinfo
from typing import Any, Literal

from django.conf import settings
from django.db import connection
from django.utils import timezone

from .events import STATS_UPDATED, background_publisher
from .notifier import Batch
from .sql import fetch

logger = logging.getLogger(__name__)

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


def current_stats_by_queue() -> dict[str, dict[str, int]]:
    """The exact counters of each queue that has jobs (or had, while its counters are not
    folded away): queue -> counter -> jobs, without `total`."""
    by_queue: dict[str, dict[str, int]] = {}
    summed = 0
    for row in fetch("job_counts_by_queue", {}):
        by_queue.setdefault(row["queue"], dict.fromkeys(COUNTERS, 0))[row["key"]] = int(row["n"])
        summed += row["summed"]
    if summed > _FOLD_ABOVE:
        fold_counts()
    return by_queue


def fold_counts() -> int:
    """Collapse the counters' appended rows into one per counter; how many were folded."""
    return int(fetch("fold_job_counts", {})[0]["folded"])


# --- the dead-letter queue's groups ----------------------------------------------------------
# Kept by the same triggers in `dlq_counts` (schema.sql), so that grouping the DLQ costs the
# variety of its errors, whatever the number of its dead letters.

# The days of arrivals a group's chart shows; the fold keeps one more (a day in any zone).
DLQ_DAYS = 14


def dlq_largest(by: Literal["type", "error", "signature"], limit: int) -> list[tuple[Any, int]]:
    """The DLQ's most common job types, error messages or error signatures, with their
    counts, most common first (ties in the value's order)."""
    return [(row["value"], int(row["n"])) for row in fetch(f"dlq_by_{by}", {"limit": limit})]


def dlq_days(
    signatures: list[str | None], tz: tzinfo, since: date
) -> dict[tuple[str | None, date], int]:
    """Dead letters per (error signature, day in `tz`) from the day `since` on."""
    rows = fetch(
        "dlq_signature_days",
        {
            "signatures": [s for s in signatures if s is not None],
            "unsigned": None in signatures,
            "time_zone": str(tz),
            "since": datetime.combine(since, datetime.min.time(), tzinfo=tz),
        },
    )
    return {(row["error_signature"], row["day"]): int(row["n"]) for row in rows}


def fold_dlq_counts() -> int:
    """Collapse the DLQ's appended group rows, and drop the arrivals no chart shows."""
    before = timezone.now() - timedelta(days=DLQ_DAYS + 1)
    return int(fetch("fold_dlq_counts", {"before": before})[0]["folded"])


# The hours of failed attempts the console charts; the fold keeps one more.
FAILURE_HOURS = 24


def failures_per_hour(since: datetime) -> dict[datetime, int]:
    """Failed attempts per real hour from `since` on (keyed by each hour's start), from the
    failed attempts' counters (`failure_counts`), whatever the failure rate."""
    rows = fetch("failures_per_hour", {"since": since})
    return {row["hour"]: int(row["n"]) for row in rows}


def fold_failure_counts() -> int:
    """Collapse the failed attempts' appended rows, and drop the hours no chart shows."""
    before = timezone.now() - timedelta(hours=FAILURE_HOURS + 1)
    return int(fetch("fold_failure_counts", {"before": before})[0]["folded"])


class StatsPublisher:
    """Publishes `stats.updated` from its own thread: at most once per interval, always
    after the last change, and behind the events of the commit that moved the counters
    (they were queued before the change was marked)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._dirty = False
        self._urgent = False
        self._published_at = float("-inf")  # the first change goes out at once
        self._publishing = False
        self._thread: threading.Thread | None = None

    def changed(self) -> None:
        with self._changed:
            if self._dirty:
                return  # the thread knows already: waking it again would only cost
            self._dirty = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="stats", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Publish the last change now, whatever the interval, and wait until it is queued
        for Redis (a stopping worker, tests). False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._urgent = self._dirty
            self._changed.notify_all()
            while self._dirty or self._publishing:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._changed.wait(remaining)
        return True

    def forget_parent(self) -> None:
        """In a forked child: the parent's thread and lock are not ours to use."""
        self.__init__()  # type: ignore[misc]

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._dirty)
                while not self._urgent and (wait := self._next_at() - time.monotonic()) > 0:
                    self._changed.wait(wait)
                self._dirty, self._urgent, self._publishing = False, False, True
            try:
                self._publish()
            finally:
                with self._changed:
                    self._published_at, self._publishing = time.monotonic(), False
                    self._changed.notify_all()

    def _next_at(self) -> float:
        return self._published_at + settings.SCHEDULER_STATS_INTERVAL

    def _publish(self) -> None:
        try:
            stats = current_stats()
        except Exception:
            # The database away: the next change publishes again; nothing else may stop us.
            logger.exception("reading the job counters for stats.updated failed")
            return
        finally:
            # Back to the pool between reads rather than held by an idle thread.
            connection.close()
        background_publisher.submit([(STATS_UPDATED, stats)])


stats_publisher = StatsPublisher()
os.register_at_fork(after_in_child=stats_publisher.forget_parent)


def count_batch(batch: Batch) -> None:
    """The notifier's subscriber: mark the counters changed after a commit that moved them."""
    if batch.counts_changed:
        stats_publisher.changed()
