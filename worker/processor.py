"""Running handlers: a pool of daemon threads, timeouts, cancellation and the job logger.

Handlers registered `inline` (trivially fast ones such as `noop`) run on the caller's thread
at once instead: a hand-off to a thread costs more than they do.

Claimed jobs wait in one queue that the idle threads take from. The worker claims more when
a thread would otherwise go idle, or ahead while the threads are taking jobs (`claim_room`):
one job per idle thread, then more to wait for a thread (the prefetch) only while their
handlers, at their type's recent pace here, would let the last of them start within
`prefetch_wait` seconds, and never more than `prefetch` (half per claim). So short jobs are
claimed in batches, while a job of a slow type, or of a type this worker has not run yet, is
never claimed to wait: it stays for an idle worker next door. A pace can be wrong (a type's
jobs turn slow): a job that waited `hand_back_after` for a thread is handed back (`overdue`)
for any worker to take, never started here. A waiting job's timeout starts when a thread
takes it.

Handler threads make no database call of the worker's: they only run handlers and hand
their outcome back through the worker's inbox. A handler that overruns its timeout
cannot be killed (Python threads cannot be), so its attempt is failed at once, its cancel
flag is set, and its thread is abandoned: a fresh thread takes its place so the pool keeps
its size, and the old one exits when the handler finally returns. Its outcome is ignored.

A job of a type this process has no handler for (a deploy out of step: the web knows a type
the worker's code does not yet; or a type removed from the code) is never claimed here
(`handles`): its jobs wait, unfailed, for a worker that has the handler, and the worker's row
names the type (`unhandled_types`) so that `jobs.explain` can say why they wait.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from queue import SimpleQueue
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from jobs import limits
from jobs.models import JobLog
from jobs.registry import HandlerSpec, JobContext, UnknownJobType, registry
from jobs.state import ClaimedJob

from . import output
from .outcome import ErrorRecord, HandlerTimeout, TransactionLeftOpen, record_of
from .threads import forget_queries

logger = logging.getLogger(__name__)

LOG_LEVEL_WIDTH = JobLog._meta.get_field("level").max_length
# Characters kept of a log line, and lines kept of an attempt: a job's log is stored, held in
# the worker's memory until written, and shown on its console page.
LOG_LINE_LIMIT = 10_000
LOG_LINES_PER_ATTEMPT = 10_000


def _roll_back_open_transactions() -> list[str]:
    """End the transactions a handler entered on this thread and never left; the aliases of
    their connections. Closing one rolls it back, and a fresh connection object takes its
    place: Django keeps a connection closed inside a transaction unusable ("the connection
    is closed") until its atomic block exits, which a handler that returned never does."""
    left_open = []
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            left_open.append(conn.alias)
            conn.close()
            del connections[conn.alias]
    return left_open


class AttemptLog:
    """A running attempt's log lines, kept until the worker writes them to `job_logs`: its
    first LOG_LINES_PER_ATTEMPT lines; the ones past them are counted, and said in one line
    when the attempt ends (`close`)."""

    def __init__(self) -> None:
        self._entries: list[tuple[datetime, str, str]] = []
        # Lines kept since the attempt began (taken or not), and dropped since `close`.
        self._kept = 0
        self._dropped = 0
        self._mutex = threading.Lock()

    def add(self, record: logging.LogRecord, message: str) -> None:
        # As `job_logs` holds it: a custom level's name cut to the column, the message cut
        # to LOG_LINE_LIMIT and its NUL and lone surrogates escaped. A line it refused would
        # fail every write with it.
        level = limits.storable_text(record.levelname)[:LOG_LEVEL_WIDTH]
        created = datetime.fromtimestamp(record.created, UTC)
        entry = (created, level, limits.storable_text(limits.cut_text(message, LOG_LINE_LIMIT)))
        with self._mutex:
            if self._kept == LOG_LINES_PER_ATTEMPT:
                self._dropped += 1
                return
            self._kept += 1
            self._entries.append(entry)

    def close(self) -> None:
        """The attempt ended: how many lines it logged past the bound, as its last line."""
        with self._mutex:
            dropped, self._dropped = self._dropped, 0
            if dropped:
                self._entries.append(
                    (
                        timezone.now(),
                        "WARNING",
                        f"{dropped:,} more log lines were dropped: an attempt keeps its first "
                        f"{LOG_LINES_PER_ATTEMPT:,}.",
                    )
                )

    def take(self) -> list[tuple[datetime, str, str]]:
        with self._mutex:
            entries, self._entries = self._entries, []
        return entries


class JobLogRouter(logging.Handler):
    """The one handler of the `worker.jobs` logger: each record goes to the log of the
    attempt named in it (handlers log through an adapter that names theirs). Records of an
    attempt no longer registered (given up, finished) are not kept: their claim is gone."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.logs: dict[str, AttemptLog] = {}

    def emit(self, record: logging.LogRecord) -> None:
        log = self.logs.get(getattr(record, "attempt_id", ""))
        if log is None:
            return
        try:
            message = self.format(record)
        except Exception:
            # As every logging handler: a line whose arguments its format refuses is reported
            # on stderr and lost, never raised into the job that logged it.
            self.handleError(record)
            return
        log.add(record, message)


job_log_router = JobLogRouter()
# Job log lines also reach the worker's own log, tagged with job and attempt ids.
job_logger = logging.getLogger("worker.jobs")
job_logger.addHandler(job_log_router)


@dataclass(eq=False)
class Attempt:
    job: ClaimedJob
    spec: HandlerSpec
    context: JobContext
    logs: AttemptLog
    timeout: float
    # The attempt id as text: its key in the log router, and what its log records carry.
    log_key: str
    # When it was queued for a thread (an inline one never is), and when a thread took it
    # (None while it waits, set under the processor's lock): the timeout counts from there.
    queued: float = 0.0
    # Its handler's expected time (its type's pace) while it waits, counted in the
    # processor's `queued_seconds`; 0 once a thread took it or it left the queue.
    expected: float = 0.0
    started: float | None = None
    deadline: float | None = None
    # Set under the processor's lock: the thread has returned / nobody wants its outcome.
    finished: bool = False
    abandoned: bool = False
    # Seconds the handler took, once it returned.
    ran_for: float | None = None

    @property
    def never_started(self) -> bool:
        """No thread took it (an inline one runs as it starts). Once it is dropped (`lose`),
        none will: a thread starts it only under the lock that marks it abandoned."""
        return self.started is None and not self.finished


@dataclass(frozen=True)
class Outcome:
    attempt: Attempt
    result: Any = None
    error: BaseException | None = None
    finished_at: datetime = field(default_factory=timezone.now)
    # Never started: it waited for a thread past the bound (`Processor.overdue`), and its
    # claim is to be undone, not reported as a success or a failure.
    handed_back: bool = False
    # Never started: its claim was lost while it waited for a thread (a cancel, which closed
    # its attempt), and its attempt is only to say that it never started.
    lost_unstarted: bool = False
    # What is written of `error`, read where the outcome is made: on the handler's thread
    # for what a handler raised (`record_of` runs job code).
    error_record: ErrorRecord | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.error is not None:
            object.__setattr__(self, "error_record", record_of(self.error))


# How much the latest run moves a type's pace: a few runs of a changed type tell.
_PACE_WEIGHT = 0.3
# A claimed job that waited this long for a thread (or twice `prefetch_wait`, if longer) is
# handed back: its type's pace, from which it was claimed to wait, was wrong.
HAND_BACK_AFTER = 1.0


class Admission:
    """One claim's choice: a job for each idle thread, then jobs to wait for a thread while
    the handler time queued up, at each type's pace, fits `budget` thread-seconds (so the
    last one waits about budget / threads), at most `prefetch` of them. A type without a
    pace (not run here yet) is never taken to wait."""

    def __init__(self, idle: int, prefetch: int, budget: float, pace: dict[str, float]) -> None:
        self._idle = idle
        self._prefetch = prefetch
        self._budget = budget
        self._pace = pace

    def admits(self, job_type: str) -> bool:
        if self._idle > 0:
            self._idle -= 1
            return True
        cost = self._pace.get(job_type)
        if self._prefetch <= 0 or cost is None or cost > self._budget:
            return False
        self._prefetch -= 1
        self._budget -= cost
        return True


def _job_logger(job: ClaimedJob, log_key: str) -> logging.LoggerAdapter[logging.Logger]:
    extra = {"job_id": str(job.id), "attempt_id": log_key, "job_type": job.type}
    return logging.LoggerAdapter(job_logger, extra)


def _check_storable(result: Any, max_bytes: int) -> None:
    """Raise JsonLimitError unless `result` is JSON that PostgreSQL holds, of at most
    `max_bytes` (SCHEDULER_MAX_RESULT_BYTES, `jobs.limits`)."""
    if unstorable := limits.json_errors(result, name="result"):
        raise limits.JsonLimitError(" ".join(unstorable))
    if too_large := limits.size_error(
        result, name="result", max_bytes=max_bytes, setting="SCHEDULER_MAX_RESULT_BYTES"
    ):
        raise limits.JsonLimitError(too_large)


class Processor:
    """Runs up to `concurrency` handlers at once and posts ("outcome", Outcome) to `inbox`."""

    def __init__(
        self,
        concurrency: int,
        inbox: SimpleQueue[Any],
        default_timeout: float,
        prefetch: int = 0,
        prefetch_wait: float = 0.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.prefetch_wait = prefetch_wait
        self.hand_back_after = max(HAND_BACK_AFTER, 2 * prefetch_wait)
        # Seconds a handler of each type took lately (moving average), for the prefetch.
        self.pace: dict[str, float] = {}
        self.default_timeout = default_timeout
        self.max_result_bytes = settings.SCHEDULER_MAX_RESULT_BYTES
        self.running: dict[uuid.UUID, Attempt] = {}
        self._inbox = inbox
        self._tasks: SimpleQueue[Attempt | None] = SimpleQueue()
        # The handler time of the jobs waiting for a thread, at their types' paces (changed
        # under the lock): what a claim's wait budget has left.
        self.queued_seconds = 0.0
        # The attempts put in `_tasks`, in that order, to find those waiting past the bound
        # from the oldest; the ones a thread took or that were dropped are skipped there.
        self._queued: deque[Attempt] = deque()
        self._lock = threading.Lock()
        self._threads = 0
        # When a thread last took a job (time.monotonic()).
        self._last_taken = 0.0
        # Each job type met so far and its handler here (None: this process has none).
        self._handlers: dict[str, HandlerSpec | None] = {}
        # The types met without a handler, in the order met; the worker's feeder leaves
        # their jobs out and its heartbeat records them. Only ever grows.
        self.unhandled_types: list[str] = []
        for _ in range(concurrency):
            self._spawn()

    @property
    def waiting(self) -> int:
        """Claimed jobs no thread has taken yet."""
        return self._tasks.qsize()

    def claim_room(self, arriving: int = 0) -> int:
        """How many jobs to claim now: one for each free thread, plus half the prefetch to
        wait for the next one. When a thread would otherwise go idle, or ahead, while the
        threads are taking jobs, once no more than the other half waits: the next claim is
        then on its way while this one's jobs run, and the two together hold at most
        `prefetch` waiting. A worker whose threads are all held by running jobs claims
        nothing. `arriving`: jobs claimed and not started yet, counted as waiting."""
        waiting = self.waiting + arriving
        free = self.concurrency - (len(self.running) - self.waiting)
        # What will still wait once every free thread took a job.
        queued = waiting - free
        half = (self.prefetch + 1) // 2
        if queued < 0:
            return half - queued
        if queued <= self.prefetch - half and (free > 0 or self._taking()):
            return half
        return 0

    def _taking(self) -> bool:
        """Whether a thread took a job lately (within `prefetch_wait`)."""
        return time.monotonic() - self._last_taken < self.prefetch_wait

    def admission(self, arriving: int = 0) -> Admission:
        """Decides, candidate by candidate (most urgent first), which jobs to claim now. A
        claim has half the wait budget, as it has half the prefetch, less the handler time
        already waiting: with the one claimed ahead, the jobs waiting still fit
        `concurrency x prefetch_wait` at their pace. Without that subtraction each claim
        ahead added its half again, and jobs of 45 ms queued up to half the prefetch, a
        second's wait (handed back over and over, once the hand-back came)."""
        idle = max(0, self.concurrency - len(self.running) - arriving)
        budget = max(0.0, self.concurrency * self.prefetch_wait / 2 - self.queued_seconds)
        return Admission(idle, self.prefetch, budget, self.pace)

    def handles(self, job_type: str) -> bool:
        """Whether this process has a handler for `job_type`: the worker claims no other."""
        return self._handler(job_type) is not None

    def _handler(self, job_type: str) -> HandlerSpec | None:
        # Looked up once per type (a Django task's module is imported then, `registry.load`):
        # a handler missing now stays missing until the worker restarts with new code.
        try:
            return self._handlers[job_type]
        except KeyError:
            pass
        try:
            spec: HandlerSpec | None = registry.load(job_type)
        except UnknownJobType:
            spec = None
            self.unhandled_types.append(job_type)
            logger.warning(
                "no handler for job type %r in this worker: its jobs are left for a worker "
                "that has one",
                job_type,
            )
        self._handlers[job_type] = spec
        return spec

    def start(self, job: ClaimedJob) -> Attempt:
        """Run a claimed job, of a type `handles` said yes to."""
        spec = self._handler(job.type)
        if spec is None:
            raise UnknownJobType(job.type)
        timeout = spec.timeout or self.default_timeout
        log = AttemptLog()
        log_key = str(job.attempt_id)
        job_log_router.logs[log_key] = log
        context = JobContext(
            id=job.id,
            type=job.type,
            payload=job.payload,
            attempt_id=job.attempt_id,
            attempt_number=job.attempt_number,
            logger=_job_logger(job, log_key),
        )
        attempt = Attempt(job, spec, context, log, timeout, log_key)
        self.running[job.id] = attempt
        if spec.inline:
            attempt.finished = True
            self._inbox.put(("outcome", self._run(attempt, inline=True)))
        else:
            attempt.queued = time.monotonic()
            with self._lock:
                attempt.expected = self.pace.get(job.type, 0.0)
                self.queued_seconds += attempt.expected
            self._queued.append(attempt)
            self._tasks.put(attempt)
        return attempt

    def accept(self, outcome: Outcome) -> bool:
        """Whether an outcome from the inbox still counts (its attempt was not given up)."""
        attempt = outcome.attempt
        if self.running.get(attempt.job.id) is not attempt:
            return False
        self._forget(attempt)
        if attempt.ran_for is not None:
            self._learn(attempt.job.type, attempt.ran_for)
        return True

    def _learn(self, job_type: str, seconds: float) -> None:
        previous = self.pace.get(job_type)
        self.pace[job_type] = (
            seconds if previous is None else previous + _PACE_WEIGHT * (seconds - previous)
        )

    def overdue(self) -> list[Outcome]:
        """Take back the claimed jobs that waited `hand_back_after` seconds for a thread: no
        thread starts them now. Their outcomes (`handed_back`), for the completer to undo
        their claims, so that an idle worker next door can run them."""
        handed_back = []
        due = time.monotonic()
        while (attempt := self._oldest_waiting()) is not None:
            if attempt.queued + self.hand_back_after > due:
                break
            self._queued.popleft()
            with self._lock:
                taken = attempt.started is not None
                if not taken:
                    attempt.abandoned = True
                    self._stop_waiting(attempt)
            if not taken:
                self._forget(attempt)
                # The thread that takes it from the queue leaves: this one replaces it.
                self._spawn()
                handed_back.append(Outcome(attempt, handed_back=True))
        return handed_back

    def next_hand_back(self) -> float | None:
        """When the oldest claimed job still waiting for a thread is due to be handed back
        (`time.monotonic()`), if one waits."""
        attempt = self._oldest_waiting()
        return None if attempt is None else attempt.queued + self.hand_back_after

    def _oldest_waiting(self) -> Attempt | None:
        """The claimed job that has waited longest for a thread; the ones taken or dropped
        since they were queued leave `_queued` here."""
        while self._queued:
            attempt = self._queued[0]
            if attempt.started is None and self.running.get(attempt.job.id) is attempt:
                return attempt
            self._queued.popleft()
        return None

    def expired(self, now: float) -> list[Outcome]:
        """Give up the attempts past their timeout; their failure outcomes, to report."""
        timed_out = []
        for attempt in list(self.running.values()):
            deadline = attempt.deadline
            if deadline is not None and now >= deadline and self._abandon(attempt):
                self._forget(attempt)
                attempt.logs.close()
                self._learn(attempt.job.type, attempt.timeout)
                timed_out.append(
                    Outcome(
                        attempt,
                        error=HandlerTimeout(f"handler ran over its {attempt.timeout:g} s"),
                    )
                )
        return timed_out

    def lose(self, job_id: uuid.UUID) -> Attempt | None:
        """The claim on `job_id` is gone (cancelled, rescued): tell the handler, drop it."""
        attempt = self.running.get(job_id)
        if attempt is not None:
            self._forget(attempt)
            attempt.context.cancel_event.set()
            self._abandon(attempt)
        return attempt

    def stop(self) -> None:
        """Let idle threads exit; running handlers keep their (daemon) threads."""
        for _ in range(self._threads):
            self._tasks.put(None)

    def _forget(self, attempt: Attempt) -> None:
        del self.running[attempt.job.id]
        job_log_router.logs.pop(attempt.log_key, None)

    def _abandon(self, attempt: Attempt) -> bool:
        with self._lock:
            if attempt.finished:
                return False
            attempt.abandoned = True
            self._stop_waiting(attempt)
        attempt.context.cancel_event.set()
        self._spawn()
        return True

    def _stop_waiting(self, attempt: Attempt) -> None:
        """Under the lock: `attempt` no longer waits for a thread (taken, or dropped)."""
        self.queued_seconds -= attempt.expected
        attempt.expected = 0.0

    def _spawn(self) -> None:
        with self._lock:
            self._threads += 1
            name = f"handler-{self._threads}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while (attempt := self._tasks.get()) is not None:
            with self._lock:
                # Lost (cancelled) or handed back while it waited: a thread was spawned in
                # our stead. Under the lock: a job handed back is never started too.
                if attempt.abandoned:
                    break
                # Waited past the bound with no loop turn to hand it back (the process
                # stalled: stopped, swapped out, starved): its claim may have been rescued
                # and run elsewhere since. The loop hands it back, its statement fenced by
                # the attempt, and spawns a thread in our stead (`overdue`).
                if time.monotonic() >= attempt.queued + self.hand_back_after:
                    break
                self._stop_waiting(attempt)
                attempt.started = self._last_taken = time.monotonic()
            attempt.deadline = attempt.started + attempt.timeout
            outcome = self._run(attempt)
            with self._lock:
                attempt.finished = True
                leave = attempt.abandoned
            self._inbox.put(("outcome", outcome))
            if leave:
                break
        # The connection this thread kept between its jobs (runworker) goes with it.
        connections.close_all()
        with self._lock:
            self._threads -= 1

    def _run(self, attempt: Attempt, *, inline: bool = False) -> Outcome:
        began = time.monotonic()
        try:
            try:
                with output.captured(_job_logger(attempt.job, attempt.log_key), LOG_LINE_LIMIT):
                    result = attempt.spec.run(attempt.context)
            finally:
                attempt.ran_for = time.monotonic() - began
            # Checked here so that one bad result cannot fail its whole completion batch.
            if result is not None:
                _check_storable(result, self.max_result_bytes)
            outcome = Outcome(attempt, result=result)
        # BaseException too: a handler's sys.exit() (a wrapped command-line tool) or a stray
        # KeyboardInterrupt fails its attempt. Let through, it would end the handler's thread,
        # leaving the attempt to time out, or the worker itself when inline; the worker stops
        # on its signals, never on what job code raises.
        except BaseException as error:
            outcome = Outcome(attempt, error=error)
        left_open = _roll_back_open_transactions()
        if left_open and outcome.error is None:
            outcome = Outcome(
                attempt,
                error=TransactionLeftOpen(
                    f"the handler returned inside transaction.atomic() on {', '.join(left_open)}"
                    " without leaving it: its database writes there were rolled back"
                ),
            )
        # A handler thread's own connections: kept for its next job unless broken; the loop
        # thread manages its connection.
        if not inline:
            close_old_connections()
            forget_queries()
        attempt.logs.close()
        return outcome
