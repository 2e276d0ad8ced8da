"""The worker: one process that claims runnable jobs and runs their handlers.

One main thread owns the loop, the in-memory scheduler and the claims' decisions; handlers
run on the processor's threads; the claimer's thread runs the claims a busy loop sends
ahead, on its own connection; the completer's thread reports finished attempts on its own
connection (group commit); a listener thread waits on PostgreSQL LISTEN. They all talk to
the loop through one inbox, so the loop sleeps exactly until something happens: an
outcome, a claim back, a wake-up, a report done, a timer, a maintenance unit falling due,
or a signal.

Each turn of the loop:
1. takes what arrived in the inbox (outcomes, handed to the completer at once;
   notifications; feed requests; jobs made runnable by a report; a claim back from the
   claimer, whose jobs it starts once it has sent the next claim), and after a claim that
   failed with a database error, asks which of its jobs the claim did take and starts those;
2. runs the maintenance units that are due (heartbeat, rescuer, feeder, claim watch,
   counter fold; the pruner has a thread of its own);
3. moves jobs whose time has come from the timer heap into the scheduler;
4. fails the attempts over their timeout, and hands back the claimed jobs that waited too
   long for a thread (both to the completer too);
5. when a handler thread would otherwise go idle, or ahead while at most half the prefetch
   waits, pops the most urgent jobs from the scheduler, enough for the free threads plus
   half the prefetch, and claims them in one statement (jobs another worker took are dropped):
   an idle worker on its own connection, a busy one on the claimer's thread, whose result
   comes back through the inbox while the loop takes outcomes.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import os
import random
import signal
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from queue import Empty, SimpleQueue
from types import FrameType
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import JobStatus, WorkerStatus
from jobs.models import Worker as WorkerRow
from jobs.queue_names import ALL_QUEUES, QueueSelection
from jobs.reconnect import DATABASE_ERRORS, Backoff
from jobs.schema_version import SchemaBehind, require_current_schema
from jobs.stats import stats_publisher

from . import output
from .claimer import Claimer
from .completer import Completer, Finished
from .maintenance import (
    BackgroundUnit,
    ClaimWatch,
    CountFold,
    Feeder,
    Heartbeat,
    Pruner,
    Rescuer,
    Unit,
    error_summary,
    runnable_jobs,
)
from .processor import Attempt, Outcome, Processor
from .schedulers import ScheduledJob, make_scheduler
from .threads import forget_queries
from .wakeup import Listener

logger = logging.getLogger(__name__)

# How often the logs of long-running attempts are written while they run.
_LOG_FLUSH_SECONDS = 1.0
# The soonest the feeder runs again when the scheduler ran dry early.
_REFEED_SECONDS = 1.0
# At start the first feed waits for the listener's LISTEN to take effect (milliseconds), so
# that one feed sees everything notified before: begun earlier, it was repeated at once when
# the listener asked for one, reloading the whole backlog twice before the first claim. If
# the listener cannot connect, the feed runs after this long anyway.
_FIRST_FEED_WAIT = 1.0
# How often the job counters' appended rows are folded (a read sums what is left).
_FOLD_SECONDS = 1.0
# What a worker passes on to its lanes (`runworker --queue`): its own stop, graceful or at
# once. Not SIGTERM again: a platform that signals every process of the group (Heroku's
# dynos) reached a lane twice, once itself and once through its worker, and the lane took
# the second for "stop now", handing back a job it had time to finish.
LANE_STOP = signal.SIGUSR1
LANE_STOP_NOW = signal.SIGUSR2
# How long a stopping worker's last writes may take: the completer's report of what
# finished, the release of the jobs still running (a forced stop), the row marked stopped.
# Not the grace, which is for running jobs: once the loop has ended, none is waited for.
_FINAL_REPORT_SECONDS = 5.0


@dataclass
class _Timed:
    unit: Unit
    due: float = 0.0


class Worker:
    """Run jobs until stopped (`--once`: until nothing is due; `--max-jobs`: until N ran)."""

    def __init__(
        self,
        *,
        scheduler: str = "heap",
        concurrency: int | None = None,
        prefetch: int | None = None,
        once: bool = False,
        max_jobs: int | None = None,
        rng: random.Random | None = None,
        queues: QueueSelection = ALL_QUEUES,
    ) -> None:
        self.scheduler_name = scheduler
        self.queues = queues
        self.scheduler = make_scheduler(scheduler)
        self.concurrency = concurrency or settings.SCHEDULER_CONCURRENCY
        self.prefetch = settings.SCHEDULER_PREFETCH if prefetch is None else prefetch
        self.once = once
        self.max_jobs = max_jobs
        self.rng = rng or random.Random()  # noqa: S311 - backoff jitter, not security
        self.id = uuid.uuid4()
        self.inbox: SimpleQueue[tuple[str, Any]] = SimpleQueue()
        self.processor = Processor(
            self.concurrency,
            self.inbox,
            settings.SCHEDULER_HANDLER_TIMEOUT,
            self.prefetch,
            settings.SCHEDULER_PREFETCH_WAIT,
        )
        self.completer = Completer(self.id, self.inbox, self.rng, _max_db_backoff())
        self.claimer = Claimer(self.id, self.queues, self.inbox)
        # The jobs of the claim on the claimer's thread, and its result once back.
        self._claiming: set[uuid.UUID] = set()
        self._claimed: tuple[list[ScheduledJob], list[state.ClaimedJob] | Exception] | None = None
        # The jobs of claims that failed with a database error: the statement may have
        # committed without its answer reaching us. Kept out of the scheduler until the
        # database says which of them this worker holds (`_settle_unanswered`).
        self._unanswered: dict[uuid.UUID, ScheduledJob] = {}
        self.listener = Listener(state.RUNNABLE_CHANNEL, self.inbox)
        self.claimed_total = 0
        # The stop asked for: 1 gracefully, 2 or more at once (`request_stop`).
        self.signals = 0
        # Each stop asked for, posted here too: a wait for the database outside the loop (at
        # start, at the end) ends on it at once, and leaves the inbox to the loop.
        self._stops: SimpleQueue[int] = SimpleQueue()
        self._own_signals = 0
        self._asked_by_worker = 0
        # The loop's thread that failed (`worker.threads`): the worker stops by force.
        self.crashed: str | None = None
        # Told of each stop signal, with the stop it now asks for (1: graceful, 2 or more:
        # at once): runworker passes it on to its lanes.
        self.signal_listeners: list[Callable[[int], None]] = []
        # Timers: (ready at, order of arming, entry). The order breaks ties, since a job may
        # hold two timers for one time (a stale one is skipped when it fires), and entries
        # cannot be compared.
        self._later: list[tuple[datetime, int, ScheduledJob]] = []
        self._timers_armed = itertools.count()
        self._later_at: dict[uuid.UUID, datetime] = {}
        # The jobs whose outcomes were handed to the completer and not reported yet (a job
        # can have two: a lost attempt's beside its new one). Until reported they are still
        # `processing` under this worker, so none of them goes back into the scheduler.
        self._reporting: Counter[uuid.UUID] = Counter()
        self._stop_deadline: float | None = None
        self._next_log_flush = 0.0
        self._units: list[_Timed] = []
        self._background: list[BackgroundUnit] = []
        # Since when the loop has reached the database without a break (None: not since the
        # last error). The rescuer judges other workers' silence only over that time.
        self._in_sight_since: datetime | None = None
        # Log lines taken from attempts whose write is not known to be committed yet.
        self._unwritten_logs: dict[uuid.UUID, list[tuple[datetime, str, str]]] = {}
        self.feeder: Feeder

    # --- lifecycle ---------------------------------------------------------------------------

    def run(self) -> int:
        """Work until told to stop; the process exit code (0: stopped cleanly)."""
        previous_handlers = self._install_signal_handlers()
        try:
            with output.attributed_output():
                return self._run()
        finally:
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)

    def _run(self) -> int:
        # Nothing runs yet: a first stop signal ends the wait for the database.
        if not self._with_database(self._register, stop_on=1):
            logger.info("worker %s stopped (clean) before it registered", self.id)
            return 0
        self._build_units()
        self._units[2].due = time.monotonic() + _FIRST_FEED_WAIT
        self.completer.start()
        self.claimer.start()
        self.listener.start()
        for unit in self._background:
            unit.start()
        logger.info(
            "worker %s started: scheduler=%s concurrency=%d prefetch=%d queues=%s",
            self.id,
            self.scheduler_name,
            self.concurrency,
            self.prefetch,
            self.queues,
        )
        forced = False
        try:
            forced = self._loop()
        finally:
            for unit in self._background:
                unit.stop(timeout=settings.SCHEDULER_SHUTDOWN_GRACE)
            self.listener.stop()
            self.claimer.stop(settings.SCHEDULER_SHUTDOWN_GRACE)
            self.processor.stop()
            if forced:
                self._receive(0.0)  # outcomes that came in since the last turn
            final_deadline = time.monotonic() + _FINAL_REPORT_SECONDS
            if not self.completer.stop(_FINAL_REPORT_SECONDS):
                logger.warning("%d outcomes could not be reported", self._reporting.total())
            if not self._with_database(lambda: self._finish(forced), deadline=final_deadline):
                held = self._held()
                logger.warning(
                    "database unavailable: %d jobs left processing and the worker not marked "
                    "stopped; once its heartbeat is SCHEDULER_WORKER_TIMEOUT old, another "
                    "worker's rescuer marks it dead and returns them",
                    len(held),
                )
                forced = forced or bool(held)
            stats_publisher.flush()
        logger.info("worker %s stopped (%s)", self.id, "forced" if forced else "clean")
        return 1 if forced else 0

    def _register(self) -> None:
        require_current_schema()
        now = timezone.now()
        WorkerRow.objects.create(
            id=self.id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            status=WorkerStatus.RUNNING,
            scheduler=self.scheduler_name,
            concurrency=self.concurrency,
            queues=list(self.queues.only) if self.queues.only is not None else None,
            other_queues=list(self.queues.excluded),
            started_at=now,
            heartbeat_at=now,
        )

    def _finish(self, forced: bool) -> None:
        # Outcomes still reporting too: a completer that failed, or did not finish in time,
        # leaves their jobs processing under this worker.
        if forced and self._held():
            released = state.release(self.id, "Worker stopped before the job finished.")
            logger.warning("returned %d running jobs to pending", len(released))
        WorkerRow.objects.filter(id=self.id).update(
            status=WorkerStatus.STOPPED, stopped_at=timezone.now()
        )

    def _holdings(self) -> tuple[Collection[uuid.UUID], ...]:
        """The ids of the jobs this worker may hold in the database, by why: running, being
        claimed, claimed by a statement whose answer was lost, being reported."""
        return (self.processor.running, self._claiming, self._unanswered, self._reporting)

    def _held(self) -> set[uuid.UUID]:
        return set().union(*self._holdings())

    def _build_units(self) -> None:
        heartbeat = settings.SCHEDULER_HEARTBEAT_INTERVAL
        worker_timeout = settings.SCHEDULER_WORKER_TIMEOUT
        feed_interval = settings.SCHEDULER_FEEDER_INTERVAL
        self.feeder = Feeder(
            self._offer,
            interval=feed_interval,
            # Jobs due before the next feed go on the timer heap, so they start on time.
            lookahead=timedelta(seconds=feed_interval * 1.5),
            limit=settings.SCHEDULER_FEEDER_LIMIT,
            queues=self.queues,
            unhandled_types=self.processor.unhandled_types,
        )
        rescuer = Rescuer(
            self._offer,
            # A dead worker's jobs come back within about 1.5 worker timeouts.
            interval=max(0.2, worker_timeout / 2),
            stuck_after=timedelta(seconds=settings.SCHEDULER_STUCK_AFTER),
            worker_timeout=timedelta(seconds=worker_timeout),
            watched_since=self._watched_since,
            queues=self.queues,
        )
        stuck_after = settings.SCHEDULER_STUCK_AFTER
        claims = ClaimWatch(
            self._held_claims,
            self._lose,
            # Several watches within the half of `stuck_after` in which a job is vouched for.
            interval=min(1.0, heartbeat, stuck_after / 4),
            stuck_after=timedelta(seconds=stuck_after),
        )
        self._units = [
            _Timed(
                Heartbeat(
                    self.id, heartbeat, self.processor.unhandled_types, register=self._register
                )
            ),
            _Timed(rescuer),
            _Timed(self.feeder),
            _Timed(claims),
            _Timed(CountFold(interval=_FOLD_SECONDS)),
        ]
        pruner = Pruner(
            interval=settings.SCHEDULER_PRUNE_INTERVAL, batch=settings.SCHEDULER_PRUNE_BATCH
        )
        self._background = [BackgroundUnit(pruner, retry_after=_max_db_backoff())]

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop as a signal asks: the first gracefully, a second at once; from the worker
        that started this one as a lane, LANE_STOP gracefully and LANE_STOP_NOW at once,
        however often they come. Safe from a signal handler (SimpleQueue.put is reentrant)
        and from any thread; it wakes the loop."""
        # The two counted apart: a lane's own SIGTERM and its worker's LANE_STOP, in either
        # order (Python runs SIGUSR1's handler before SIGTERM's when both are pending), are
        # one graceful stop.
        if signum == LANE_STOP:
            self._asked_by_worker = max(self._asked_by_worker, 1)
        elif signum == LANE_STOP_NOW:
            self._asked_by_worker = 2
        else:
            self._own_signals += 1
        self.signals = max(self._own_signals, self._asked_by_worker)
        self.inbox.put(("signal", signum))
        self._stops.put(signum)
        for listener in self.signal_listeners:
            listener(self.signals)

    def _install_signal_handlers(self) -> dict[int, Any]:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.request_stop(signum)

        # SIGHUP (the terminal or ssh session it was started from closed) as SIGTERM, unless
        # it was started to ignore it (`nohup`): its default ended the worker on the spot,
        # its jobs left `processing` until another worker's rescue ran them again.
        signals = [signal.SIGTERM, signal.SIGINT, LANE_STOP, LANE_STOP_NOW]
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            signals.append(signal.SIGHUP)
        return {signum: signal.signal(signum, on_signal) for signum in signals}

    # --- the loop ----------------------------------------------------------------------------

    def _loop(self) -> bool:
        """Run until done; True when stopped by force (second signal or grace over)."""
        backoff = Backoff(0.5, _max_db_backoff())
        wait = 0.0
        stopping_marked = False
        while True:
            self._receive(wait)
            if self.signals >= 2 or self.crashed is not None:
                return True
            if self.signals == 1 and not stopping_marked:
                stopping_marked = True
                self._begin_stop()
            # Checked before the turn too: during an outage every turn fails.
            if self._stop_deadline is not None and time.monotonic() >= self._stop_deadline:
                logger.warning("shutdown grace period over with jobs still running")
                return True
            if self._done():
                return False
            forget_queries()
            try:
                wait = self._turn()
                backoff.succeeded()
            except DATABASE_ERRORS as exc:
                wait = backoff.failed()
                logger.error(
                    "database unavailable (%s); retrying in %.1f s",
                    error_summary(type(exc).__name__, str(exc)),
                    wait,
                )
                self._lost_database()
                continue
            if wait < 0:
                return False

    def _begin_stop(self) -> None:
        logger.info("stopping: no new claims, waiting for %d running", len(self.processor.running))
        self._stop_deadline = time.monotonic() + settings.SCHEDULER_SHUTDOWN_GRACE
        try:
            WorkerRow.objects.filter(id=self.id).update(status=WorkerStatus.STOPPING)
        except DATABASE_ERRORS as exc:
            # Not waited for: the grace runs for the jobs, and `_finish` marks the row.
            logger.error(
                "database unavailable (%s): not marked stopping",
                error_summary(type(exc).__name__, str(exc)),
            )
            self._lost_database()

    def _turn(self) -> float:
        """One pass; how long the loop may sleep before the next, or -1 to finish."""
        if self._in_sight_since is None:
            self._in_sight_since = timezone.now()
        self._take_claimed()
        if self._unanswered:
            self._settle_unanswered()
        now = time.monotonic()
        for timed in self._units:
            if now >= timed.due:
                timed.unit.run_once()
                timed.due = time.monotonic() + timed.unit.interval
        self._promote_timers()
        self._hand_over(self.processor.expired(time.monotonic()))
        if handed_back := self.processor.overdue():
            logger.info(
                "handing back %d claimed jobs that waited %.1f s for a thread here",
                len(handed_back),
                self.processor.hand_back_after,
            )
            self._hand_over(handed_back)
            # Not run here: `--max-jobs` counts them no more.
            self.claimed_total -= len(handed_back)
        if now >= self._next_log_flush:
            self._flush_running_logs()
            self._next_log_flush = now + _LOG_FLUSH_SECONDS
        stopping = self.signals > 0
        if not stopping:
            self._claim()

        if self._done():
            return -1
        busy = any(self._holdings())
        if self.once and not busy and not self.scheduler:
            # Make sure nothing became due since the last feed before leaving.
            entries, _ = runnable_jobs(
                limit=settings.SCHEDULER_CLAIM_BATCH,
                queues=self.queues,
                unhandled_types=self.processor.unhandled_types,
            )
            if not self._offer(entries):
                return -1
            return 0.0
        if not self.scheduler and (self.feeder.truncated or self.feeder.stale):
            # More is waiting (the last feed hit its limit), or jobs were dropped because
            # another transaction held them for a moment: feed again soon, not in 30 s.
            feed = self._units[2]
            feed.due = min(feed.due, feed.due - self.feeder.interval + _REFEED_SECONDS)
        if (
            self.scheduler
            and not self._claiming
            and self.processor.claim_room()
            and not stopping
            and not self._quota_reached()
        ):
            return 0.0
        return self._sleep_budget()

    def _sleep_budget(self) -> float:
        now = time.monotonic()
        wake = min(timed.due for timed in self._units)
        if self._later:
            wake = min(wake, now + (self._later[0][0] - timezone.now()).total_seconds())
        deadlines = [a.deadline for a in self.processor.running.values() if a.deadline]
        if deadlines:
            wake = min(wake, *deadlines)
        if (hand_back := self.processor.next_hand_back()) is not None:
            wake = min(wake, hand_back)
        if self.processor.running:
            wake = min(wake, self._next_log_flush)
        return max(0.0, wake - now)

    def _receive(self, wait: float) -> None:
        """Take everything in the inbox, waiting up to `wait` seconds for the first item."""
        try:
            kind, value = self.inbox.get(timeout=wait) if wait > 0 else self.inbox.get_nowait()
        except Empty:
            return
        finished: list[Outcome] = []
        # Taken once this batch's outcomes are handed over: a notification of a job whose
        # outcome is among them finds it reporting, not free to be claimed again.
        notifications: list[str] = []
        while True:
            if kind == "outcome":
                if self.processor.accept(value):
                    finished.append(value)
            elif kind == "claimed":
                self._claimed = value
            elif kind == "reported":
                job_ids, offers = value
                self._reporting -= Counter(job_ids)
                self._offer(offers)
            elif kind == "notify":
                notifications.append(value)
            elif kind == "crashed":
                self.crashed = value
            elif kind == "feed" and self.feeder.started_at < value:
                # The listener (re)connected. A feed begun since its LISTEN took effect saw
                # everything notified before: at start-up, reloading the whole backlog again
                # stalled the first claims by a third of a second per 20,000 jobs.
                self._units[2].due = 0.0
            try:
                kind, value = self.inbox.get_nowait()
            except Empty:
                break
        self._hand_over(finished)
        for payload in notifications:
            self._on_notify(payload)

    def _on_notify(self, payload: str) -> None:
        message = _decode(payload)
        if message is None:
            return
        if "cancelled" in message:
            job_id = uuid.UUID(message["cancelled"])
            attempt = self._drop(job_id)
            if attempt is not None:
                self._say_cancelled(job_id, attempt)
        elif "id" in message:
            if "queue" not in message or self.queues.serves(message["queue"]):
                self._offer([ScheduledJob.from_row(message)])
        elif message.get("feed"):
            self._units[2].due = 0.0

    # --- the scheduler and the timers --------------------------------------------------------

    def _offer(self, entries: list[ScheduledJob]) -> int:
        """Take in runnable jobs: due ones into the scheduler, later ones on the timer heap;
        none of a type this worker has no handler for."""
        new = 0
        horizon = timezone.now()
        for entry in entries:
            if (
                not self.processor.handles(entry.type)
                or entry.job_id in self.processor.running
                or entry.job_id in self._claiming
                or entry.job_id in self._unanswered
                or entry.job_id in self._reporting
            ):
                continue
            if entry.ready_at <= horizon:
                new += entry.job_id not in self.scheduler
                self.scheduler.insert(entry)
                self._later_at.pop(entry.job_id, None)
            elif self._later_at.get(entry.job_id) != entry.ready_at:
                new += 1
                self._later_at[entry.job_id] = entry.ready_at
                heapq.heappush(self._later, (entry.ready_at, next(self._timers_armed), entry))
        return new

    def _promote_timers(self) -> None:
        horizon = timezone.now()
        while self._later and self._later[0][0] <= horizon:
            ready_at, _, entry = heapq.heappop(self._later)
            # A stale timer (the job was re-offered with another time) is skipped.
            if self._later_at.get(entry.job_id) == ready_at:
                del self._later_at[entry.job_id]
                self.scheduler.insert(entry)

    def _quota_reached(self) -> bool:
        return self.max_jobs is not None and self.claimed_total >= self.max_jobs

    def _done(self) -> bool:
        """Whether the loop may end: stopping or `--max-jobs` reached, and nothing held. Asked
        before each turn too, which an outage fails: a worker stopped with nothing to finish
        waited out the grace, then called its stop forced."""
        return (self.signals > 0 or self._quota_reached()) and not any(self._holdings())

    def _claim(self, arriving: int = 0) -> None:
        """Claim the most urgent jobs of the scheduler, as many as `claim_room` allows, in one
        statement that commits on its own; handlers start right after it. A worker with
        nothing running claims on its own connection (the start latency); a busy one sends
        the claim to the claimer's thread and goes on taking outcomes meanwhile. `arriving`:
        jobs claimed and not yet started, which count as waiting."""
        if self._claiming:
            return
        popped = self._pop_for_claim(arriving)
        if not popped:
            return
        if self.processor.running or arriving:
            self._claiming = {e.job_id for e in popped}
            self.claimer.submit(popped)
            return
        try:
            claimed = state.claim(self.id, len(popped), [e.job_id for e in popped], self.queues)
        except DATABASE_ERRORS:
            self._unanswered.update((e.job_id, e) for e in popped)
            raise
        self._start(popped, claimed)

    def _take_claimed(self) -> None:
        """Start the jobs of the claim back from the claimer's thread (its error: raised)."""
        if self._claimed is None:
            return
        popped, claimed = self._claimed
        self._claimed = None
        self._claiming = set()
        if isinstance(claimed, Exception):
            self._unanswered.update((e.job_id, e) for e in popped)
            raise claimed
        # The next claim goes out before these jobs start, so the server works on it while
        # they run (starting them is most of the loop's time per job).
        if not self.signals:
            self._claim(arriving=len(claimed))
        self._start(popped, claimed)

    def _settle_unanswered(self) -> None:
        """Start the jobs that claims without an answer did take, and give the others back to
        the scheduler. A claimed job is this worker's alone: left, it would wait in
        `processing` for SCHEDULER_STUCK_AFTER, then count as a lost attempt that never ran.
        Raises the database's error while it is still away (the jobs stay unanswered)."""
        held = state.held_claims(self.id, list(self._unanswered))
        entries, self._unanswered = self._unanswered, {}
        taken = [entries.pop(job.id) for job in held]
        self._put_back(list(entries.values()))
        if held:
            logger.warning(
                "%d jobs claimed by a statement whose answer was lost: started now", len(held)
            )
        self._start(taken, held)

    def _start(self, popped: list[ScheduledJob], claimed: list[state.ClaimedJob]) -> None:
        # Jobs popped but not claimed were taken by another worker (or cancelled): dropped.
        if len(claimed) < len(popped):
            self.feeder.stale = True
        self.claimed_total += len(claimed)
        for job in claimed:
            self.processor.start(job)

    def _put_back(self, popped: list[ScheduledJob]) -> None:
        for entry in popped:
            self.scheduler.insert(entry)

    def _pop_for_claim(self, arriving: int) -> list[ScheduledJob]:
        room = self.processor.claim_room(arriving)
        limit = min(room, settings.SCHEDULER_CLAIM_BATCH, len(self.scheduler))
        if self.max_jobs is not None:
            limit = min(limit, self.max_jobs - self.claimed_total - arriving)
        admission = self.processor.admission(arriving)
        popped: list[ScheduledJob] = []
        while len(popped) < limit:
            entry = self.scheduler.pop()
            if not admission.admits(entry.type):
                self.scheduler.insert(entry)
                break
            popped.append(entry)
        return popped

    # --- outcomes ----------------------------------------------------------------------------

    def _hand_over(self, outcomes: list[Outcome]) -> None:
        """Give finished attempts, with the log lines they have left, to the completer."""
        if not outcomes:
            return
        unwritten = self._unwritten_logs
        self.completer.submit(
            [
                Finished(o, unwritten.pop(o.attempt.job.attempt_id, []) + o.attempt.logs.take())
                for o in outcomes
            ]
        )
        self._reporting.update(o.attempt.job.id for o in outcomes)

    def _write_logs(self, attempt: Attempt) -> None:
        """Write a running attempt's new log lines. They stay in `_unwritten_logs` until the
        caller knows they are committed: a write that failed (database away) is made again."""
        lines = self._unwritten_logs.setdefault(attempt.job.attempt_id, [])
        lines += attempt.logs.take()
        if lines:
            state.append_logs(attempt.job.id, attempt.job.attempt_id, lines)

    def _flush_running_logs(self) -> None:
        for attempt in list(self.processor.running.values()):
            self._write_logs(attempt)
            self._unwritten_logs.pop(attempt.job.attempt_id, None)

    def _held_claims(self) -> dict[uuid.UUID, uuid.UUID]:
        return {job_id: a.job.attempt_id for job_id, a in self.processor.running.items()}

    def _lose(self, job_id: uuid.UUID, status: str | None) -> None:
        """The claim watch found the claim on `job_id` gone; the job's status says why."""
        attempt = self._drop(job_id)
        if attempt is None:
            return
        if status == JobStatus.CANCELLED:
            # Its notification may come after the watch: the same line either way.
            self._say_cancelled(job_id, attempt)
        else:
            logger.warning(
                "job %s: claim lost (the job is %s now); handler told to stop",
                job_id,
                status or "deleted",
            )

    @staticmethod
    def _say_cancelled(job_id: uuid.UUID, attempt: Attempt) -> None:
        when = "before it started" if attempt.never_started else "while running"
        logger.info("job %s was cancelled %s", job_id, when)

    def _drop(self, job_id: uuid.UUID) -> Attempt | None:
        """Give up the attempt of `job_id`, whose claim is gone (cancelled, rescued): its
        handler is told to stop. One that still waited for a thread never starts, and goes
        to the completer for its attempt to say so: a cancel records it as running."""
        attempt = self.processor.lose(job_id)
        if attempt is not None:
            self._unwritten_logs.pop(attempt.job.attempt_id, None)
            if attempt.never_started:
                self._hand_over([Outcome(attempt, lost_unstarted=True)])
        return attempt

    # --- database trouble ----------------------------------------------------------------------

    def _with_database(
        self, action: Callable[[], Any], *, stop_on: int = 2, deadline: float | None = None
    ) -> bool:
        """Run `action`, retrying with backoff while the database is unreachable.

        False when the `stop_on`th stop signal came before it succeeded (by default the
        second: the first one's graceful stop still has to record what finished), or
        `deadline` (monotonic) passed."""
        backoff = Backoff(0.25, _max_db_backoff())
        while True:
            try:
                action()
                return True
            except SchemaBehind as exc:
                # The database answers: it is not an outage, and the cure is `migrate`.
                delay = backoff.failed()
                logger.warning("database not migrated: %s; checking again in %.1f s", exc, delay)
            except DATABASE_ERRORS as exc:
                delay = backoff.failed()
                logger.error(
                    "database unavailable (%s); retrying in %.1f s",
                    error_summary(type(exc).__name__, str(exc)),
                    delay,
                )
                self._lost_database()
            wake = time.monotonic() + delay
            if deadline is not None:
                wake = min(wake, deadline)
            self._wait_for_stop(wake, stop_on)
            if self.signals >= stop_on or (deadline is not None and time.monotonic() >= deadline):
                return False

    def _wait_for_stop(self, until: float, stop_on: int) -> None:
        """Sleep until `until` (monotonic), or only until the `stop_on`th stop is asked for."""
        while self.signals < stop_on and (left := until - time.monotonic()) > 0:
            # Each stop asked for wakes it, also one taken since the wait began.
            with contextlib.suppress(Empty):
                self._stops.get(timeout=left)

    def _lost_database(self) -> None:
        self._in_sight_since = None
        try:
            connection.close()
        except DATABASE_ERRORS:
            logger.debug("closing the broken connection failed", exc_info=True)

    def _watched_since(self) -> datetime:
        return self._in_sight_since or timezone.now()


def _max_db_backoff() -> float:
    # A worker cut off tries again at least once per heartbeat interval, so once the database
    # is back every live worker beats again well within the timeout the others then wait.
    return settings.SCHEDULER_HEARTBEAT_INTERVAL


def _decode(payload: str) -> dict[str, Any] | None:
    try:
        message = json.loads(payload)
    except ValueError:
        logger.warning("ignored a malformed wake-up payload: %r", payload[:200])
        return None
    return message if isinstance(message, dict) else None
