"""The worker's periodic work, as small units: each has an interval and a `run_once()` that
returns what it did as counts, so tests call it directly and the worker loop only schedules.

- Heartbeat: proves the worker alive (and brings back a worker that was declared dead).
- Feeder: loads runnable jobs, including those due within a look-ahead window, so nothing
  is missed even when a wake-up notification was.
- Rescuer: declares dead the workers that stopped heartbeating while this one could see the
  database, takes their jobs back, and takes back jobs stuck in processing
  (`jobs.state.rescue_lost`); each pass that took jobs back says so in one WARNING line,
  naming the workers that lost them and which jobs went to pending or to the DLQ.
- ClaimWatch: notices running attempts whose claim is gone (cancelled, rescued) so their
  handler is told to stop and their outcome is not waited for.
- Pruner: deletes finished jobs past their retention (`jobs.retention`), one bounded batch
  per run, at once again after a full batch. It runs on a thread of its own
  (`BackgroundUnit`): a backlog of a million rows takes minutes, which the loop's claims
  must not wait behind.
- CountFold: collapses the rows the job counters, the DLQ's groups and the failed
  attempts' counters appended (`jobs.stats.fold_counts`, `fold_dlq_counts`,
  `fold_failure_counts`), so a read of `/jobs/stats` or of the DLQ's charts sums a few rows.

Recurring series need no unit: the next slot is created by the completion statement itself.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from jobs import limits, metrics, retention, state, stats
from jobs.models import JobAttempt, Worker, WorkerStatus
from jobs.queue_names import ALL_QUEUES, QueueSelection
from jobs.reconnect import DATABASE_ERRORS

from .schedulers import ScheduledJob
from .threads import forget_queries

logger = logging.getLogger(__name__)

# The most of a message's first line that a line of the worker's log quotes: the whole
# message (a stack trace, a server's hint on the next lines) is the attempt's, or noise.
QUOTED_MESSAGE_LIMIT = 200
# The most job ids a rescue's line names for each place they went: a dead worker may have
# held hundreds.
NAMED_JOBS_LIMIT = 10


def error_summary(error_type: str, message: str) -> str:
    """An error as a line of the worker's log quotes it: its type and its message's first
    line, cut to QUOTED_MESSAGE_LIMIT (`OperationalError: the connection is lost`)."""
    first_line = next(iter(message.strip().splitlines()), "")
    if not first_line:
        return error_type
    return f"{error_type}: {limits.cut_text(first_line, QUOTED_MESSAGE_LIMIT)}"


class Unit:
    name = "unit"
    interval = 1.0

    def run_once(self) -> dict[str, int]:
        raise NotImplementedError


def runnable_jobs(
    *,
    lookahead: timedelta = timedelta(0),
    limit: int,
    job_ids: Sequence[uuid.UUID] | None = None,
    queues: QueueSelection = ALL_QUEUES,
    unhandled_types: Sequence[str] = (),
) -> tuple[list[ScheduledJob], bool]:
    """Runnable jobs of `queues` due within `lookahead`, none of `unhandled_types`, most
    urgent first, and whether `limit` cut them."""
    rows = state.runnable_jobs(
        horizon=timezone.now() + lookahead,
        limit=limit,
        job_ids=job_ids,
        queues=queues,
        unhandled_types=unhandled_types,
    )
    entries = [
        ScheduledJob(
            job_id=row["id"],
            priority=row["priority"],
            ready_at=row["run_at"],
            created_at=row["created_at"],
            type=row["type"],
        )
        for row in rows
    ]
    return entries, len(rows) >= limit


class Heartbeat(Unit):
    name = "heartbeat"

    def __init__(
        self,
        worker_id: uuid.UUID,
        interval: float,
        unhandled_types: Sequence[str] = (),
        register: Callable[[], None] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.interval = interval
        # The worker's list of the types it has no handler for, recorded for `jobs.explain`.
        self.unhandled_types = unhandled_types
        # Writes the worker's row again: one declared dead while cut off, then kept no
        # longer than the retention (`prune_workers`), would otherwise run unseen by the
        # console, /metrics and the rescue, which reads a worker's liveness from its row.
        self.register = register

    def run_once(self) -> dict[str, int]:
        # A worker declared dead (it was stopped, or cut off) that beats again is alive: the
        # attempts it held were rescued, and their claims' fencing refuses its late outcomes.
        beats = Worker.objects.filter(id=self.worker_id).update(
            heartbeat_at=timezone.now(),
            unhandled_types=list(self.unhandled_types),
            status=Case(
                When(status=WorkerStatus.DEAD, then=Value(WorkerStatus.RUNNING)),
                default=F("status"),
            ),
            stopped_at=Case(When(status=WorkerStatus.DEAD, then=None), default=F("stopped_at")),
        )
        if beats == 0 and self.register is not None:
            self.register()
            logger.warning("worker %s had been pruned as stopped; registered again", self.worker_id)
            return {"beats": 0, "registered": 1}
        return {"beats": beats}


class Feeder(Unit):
    name = "feeder"

    def __init__(
        self,
        sink: Callable[[list[ScheduledJob]], int],
        *,
        interval: float,
        lookahead: timedelta,
        limit: int,
        queues: QueueSelection = ALL_QUEUES,
        unhandled_types: Sequence[str] = (),
    ) -> None:
        self.sink = sink
        self.interval = interval
        self.lookahead = lookahead
        self.limit = limit
        self.queues = queues
        # The worker's list, which grows as it meets types it has no handler for.
        self.unhandled_types = unhandled_types
        # The last run hit `limit`: more is waiting, feed again once the scheduler runs dry.
        self.truncated = False
        # Set by the worker when it dropped jobs it could not claim: some may still be due.
        self.stale = False
        # `time.monotonic()` when the last run began.
        self.started_at = float("-inf")

    def run_once(self) -> dict[str, int]:
        self.started_at = time.monotonic()
        self.stale = False
        entries, self.truncated = runnable_jobs(
            lookahead=self.lookahead,
            limit=self.limit,
            queues=self.queues,
            unhandled_types=self.unhandled_types,
        )
        return {"seen": len(entries), "new": self.sink(entries)}


class Rescuer(Unit):
    name = "rescuer"

    def __init__(
        self,
        sink: Callable[[list[ScheduledJob]], int],
        *,
        interval: float,
        stuck_after: timedelta,
        worker_timeout: timedelta,
        watched_since: Callable[[], datetime],
        queues: QueueSelection = ALL_QUEUES,
    ) -> None:
        self.sink = sink
        self.queues = queues
        self.interval = interval
        self.stuck_after = stuck_after
        self.worker_timeout = worker_timeout
        # Since when this worker has reached the database without a break: another worker's
        # silence is evidence only over that time (see `jobs.state.rescue_lost`).
        self.watched_since = watched_since

    def run_once(self) -> dict[str, int]:
        # The lost workers are read in the rescue's transaction: its line is written once the
        # rescue committed, and a rescue undone by an error is not said to have happened.
        with transaction.atomic():
            rescued = state.rescue_lost(
                stuck_after=self.stuck_after,
                worker_timeout=self.worker_timeout,
                watched_since=self.watched_since(),
            )
            lost_workers = _lost_workers(rescued) if rescued else {}
        if rescued:
            _log_rescue(rescued, lost_workers)
        pending = [uuid.UUID(job["id"]) for job in rescued if job["status"] == "pending"]
        new = 0
        if pending:
            entries, _ = runnable_jobs(limit=len(pending), job_ids=pending, queues=self.queues)
            new = self.sink(entries)
        return {"rescued": len(rescued), "new": new}


def _lost_workers(rescued: Sequence[state.JobObject]) -> dict[str, str]:
    """The workers of the `rescued` jobs' lost attempts (a stuck job's may be alive), each
    id with how a log line names it."""
    lost_attempts = {(job["id"], job["attempt_count"]) for job in rescued}
    attempts = (
        JobAttempt.objects.filter(job_id__in=[job["id"] for job in rescued])
        .order_by("worker_id")
        .values_list("job_id", "attempt_number", "worker_id", "worker__hostname", "worker__pid")
    )
    return {
        str(worker_id): f"{worker_id} ({hostname} pid {pid})"
        for job_id, number, worker_id, hostname, pid in attempts
        if (str(job_id), number) in lost_attempts
    }


def _log_rescue(rescued: Sequence[state.JobObject], lost_workers: dict[str, str]) -> None:
    pending = [job["id"] for job in rescued if not job["in_dlq"]]
    dead_lettered = [job["id"] for job in rescued if job["in_dlq"]]
    logger.warning(
        "took back %d jobs of lost worker%s %s: %d to pending%s, %d to the dead-letter queue%s",
        len(rescued),
        "s" if len(lost_workers) > 1 else "",
        ", ".join(lost_workers.values()),
        len(pending),
        _named(pending),
        len(dead_lettered),
        _named(dead_lettered),
        extra={
            "lost_workers": list(lost_workers),
            "pending_ids": pending[:NAMED_JOBS_LIMIT],
            "dlq_ids": dead_lettered[:NAMED_JOBS_LIMIT],
        },
    )


def _named(job_ids: Sequence[str]) -> str:
    """The ids a rescue's line names, ` (a, b)`, at most NAMED_JOBS_LIMIT of them."""
    if not job_ids:
        return ""
    more = len(job_ids) - NAMED_JOBS_LIMIT
    named = ", ".join(job_ids[:NAMED_JOBS_LIMIT])
    return f" ({named}, and {more} more)" if more > 0 else f" ({named})"


class ClaimWatch(Unit):
    name = "claims"

    def __init__(
        self,
        held: Callable[[], dict[uuid.UUID, uuid.UUID]],
        on_lost: Callable[[uuid.UUID, str | None], Any],
        *,
        interval: float,
        stuck_after: timedelta,
    ) -> None:
        self.held = held
        self.on_lost = on_lost
        self.interval = interval
        # Vouched for twice within the time after which a job counts as stuck.
        self.vouch_every = stuck_after / 2

    def run_once(self) -> dict[str, int]:
        held = self.held()
        if not held:
            return {"checked": 0, "lost": 0}
        lost = state.lost_claims(held, vouch_before=timezone.now() - self.vouch_every)
        for job_id, status in lost.items():
            self.on_lost(job_id, status)
        return {"checked": len(held), "lost": len(lost)}


class CountFold(Unit):
    name = "counts"

    def __init__(self, *, interval: float) -> None:
        self.interval = interval

    def run_once(self) -> dict[str, int]:
        return {
            "folded": stats.fold_counts(),
            "dlq_folded": stats.fold_dlq_counts(),
            "failures_folded": stats.fold_failure_counts(),
            "metrics_folded": metrics.fold(),
        }


class Pruner(Unit):
    name = "pruner"

    def __init__(self, *, interval: float, batch: int) -> None:
        self.every = interval
        self.interval = interval
        self.batch = batch
        self._more = False

    def run_once(self) -> dict[str, int]:
        pruned = retention.prune(limit=self.batch, continues=self._more)
        # Another worker prunes now; this one looks again at its next pass.
        self._more = pruned is not None and pruned.more
        self.interval = 0.0 if self._more else self.every
        if pruned is None:
            return {"jobs": 0, "attempts": 0, "logs": 0}
        return {"jobs": pruned.jobs, "attempts": pruned.attempts, "logs": pruned.logs}


class BackgroundUnit:
    """Runs a unit on a thread of its own, with its own database connection, so that a long
    pass never holds up the loop's claims; the database being away, or a pass failing,
    only delays the unit."""

    def __init__(self, unit: Unit, *, retry_after: float) -> None:
        self.unit = unit
        self.retry_after = retry_after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"unit-{unit.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Asks it to stop; a pass under way finishes its batch (one short transaction)."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.unit.run_once()
                    wait = self.unit.interval
                except DATABASE_ERRORS as exc:
                    logger.error(
                        "%s: database unavailable (%s)",
                        self.unit.name,
                        error_summary(type(exc).__name__, str(exc)),
                    )
                    connection.close()
                    wait = self.retry_after
                except Exception:
                    # Its work is not what runs jobs: it is tried again, not the worker
                    # stopped, and every failure is in the log with its traceback.
                    logger.exception("%s: a pass failed; trying again", self.unit.name)
                    wait = self.retry_after
                forget_queries()
                if wait > 0:
                    self._stop.wait(wait)
        finally:
            connection.close()
