"""Reporting finished attempts: one thread with its own database connection, group commit.

The loop hands over each turn's finished attempts (`submit`) and goes back to claiming at
once: a claim never waits behind a completion. This thread takes everything handed over
since its last commit and reports it in ONE transaction: one `append_logs_of` for all their
log lines, one `hand_back` for the claims never started (`Processor.overdue`), one
`note_unstarted` for those a cancel took while they waited, one `fail` for all failures,
one `complete` for all successes (with their dependents released), then one commit. While
that commit is on its way, the next outcomes pile up and go together in the next one, so
the batch grows with the load and a lone job is reported at once (no timer). Fencing stays
with the statements (`jobs.state`): an outcome whose claim was lost is refused, logged, and
dropped. Once the transaction commits, each failed attempt is one WARNING line of the
worker's log (its error, and its retry's time or the DLQ); a success is a line only at
DEBUG, which a drain of thousands of jobs a second must not pay for.

What becomes runnable through a report (a retry, a job handed back, the next run of a
recurring job, a released dependent) goes back to the loop as ("reported", (job ids,
entries)) on its inbox; the other workers hear of it through NOTIFY. If the transaction
fails (database away), the same outcomes and their log lines are reported again after a
backoff, with whatever arrived meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any

from django.conf import settings
from django.db import (
    DataError,
    IntegrityError,
    connection,
    transaction,
)

from jobs import state
from jobs.models import JobStatus
from jobs.reconnect import DATABASE_ERRORS, Backoff

from .maintenance import error_summary, runnable_jobs
from .outcome import wait_after
from .processor import Outcome
from .schedulers import ScheduledJob
from .threads import forget_queries, loop_thread

logger = logging.getLogger(__name__)

# Job-object times are cut to the millisecond: a time read from one is waited for this much
# longer, since a claim a hair too early finds the job not due yet.
TRUNCATION = timedelta(milliseconds=1)
# A value of the batch refused, by PostgreSQL or by the encoding of a parameter: not an outage,
# so the same statements would be refused again.
_REFUSALS = (DataError, IntegrityError, ValueError, TypeError)


class OutcomeNotRecorded(Exception):
    """What an attempt failed with when its own outcome (result, error or log lines) could
    not be written."""


@dataclass
class Finished:
    """A finished attempt and the log lines it still has to write."""

    outcome: Outcome
    lines: list[tuple[datetime, str, str]]


class Completer:
    def __init__(
        self, worker_id: Any, inbox: SimpleQueue[Any], rng: random.Random, max_backoff: float
    ) -> None:
        self.worker_id = worker_id
        self._inbox = inbox
        self._rng = rng
        self._max_backoff = max_backoff
        self._queue: SimpleQueue[list[Finished] | None] = SimpleQueue()
        self._stopping = threading.Event()
        self._thread = loop_thread(self._run, "completer", inbox)

    def start(self) -> None:
        self._thread.start()

    def submit(self, finished: list[Finished]) -> None:
        if finished:
            self._queue.put(finished)

    def stop(self, timeout: float | None = None) -> bool:
        """Report what was submitted, then end; False if that did not happen in `timeout`."""
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            # Whatever it reports later is refused anyway once the jobs are released.
            self._stopping.set()
            return False
        return True

    def _run(self) -> None:
        pending: list[Finished] = []
        backoff = Backoff(0.25, self._max_backoff)
        ending = False
        while True:
            ending = self._take(pending, block=not (pending or ending)) or ending
            if not pending:
                if ending:
                    break
                continue
            try:
                offers = self._report_batch(pending)
            except DATABASE_ERRORS as exc:
                wait = backoff.failed()
                logger.error(
                    "database unavailable (%s); reporting %d outcomes again in %.1f s",
                    error_summary(type(exc).__name__, str(exc)),
                    len(pending),
                    wait,
                )
                _close_connection()
                if self._stopping.wait(wait):
                    return
                continue
            backoff.succeeded()
            self._inbox.put(
                ("reported", ([item.outcome.attempt.job.id for item in pending], offers))
            )
            pending = []
            forget_queries()
        _close_connection()

    def _take(self, pending: list[Finished], *, block: bool) -> bool:
        """Move what was submitted into `pending`; True once told to end."""
        try:
            item = self._queue.get() if block else self._queue.get_nowait()
            while True:
                if item is None:
                    return True
                pending += item
                item = self._queue.get_nowait()
        except Empty:
            return False

    def _report_batch(self, finished: Sequence[Finished]) -> list[ScheduledJob]:
        """Report `finished` in one transaction. When one of its values is refused (by the
        database, or in encoding it), the same batch would be refused at every try: each
        outcome is then reported in a transaction of its own, and one refused alone is
        recorded as its attempt's failure (`OutcomeNotRecorded`) without its log lines."""
        try:
            with transaction.atomic():
                return self._report(finished)
        except _REFUSALS as refusal:
            logger.error(
                "a batch of %d outcomes was refused (%r); reporting each apart",
                len(finished),
                refusal,
            )
        return [offer for item in finished for offer in self._report_alone(item)]

    def _report_alone(self, item: Finished) -> list[ScheduledJob]:
        try:
            with transaction.atomic():
                return self._report([item])
        except _REFUSALS as refusal:
            job = item.outcome.attempt.job
            logger.error("outcome of job %s refused (%r): recorded as a failure", job.id, refusal)
            error = OutcomeNotRecorded(f"its outcome was refused: {refusal!r}")
            failure = Outcome(
                item.outcome.attempt, error=error, finished_at=item.outcome.finished_at
            )
        try:
            with transaction.atomic():
                return self._report([Finished(failure, [])])
        except _REFUSALS:
            # Left processing: the rescue of stuck jobs returns it (SCHEDULER_STUCK_AFTER).
            logger.exception("failure of job %s refused too", job.id)
            return []

    def _report(self, finished: Sequence[Finished]) -> list[ScheduledJob]:
        """Record the outcomes; the jobs that became runnable through them."""
        state.append_logs_of(
            [
                (item.outcome.attempt.job.id, item.outcome.attempt.job.attempt_id, item.lines)
                for item in finished
                if item.lines
            ]
        )
        handed_back: list[Outcome] = []
        unstarted: list[tuple[uuid.UUID, uuid.UUID]] = []
        failures: list[Outcome] = []
        successes: list[state.Success] = []
        for item in finished:
            o = item.outcome
            if o.handed_back:
                handed_back.append(o)
            elif o.lost_unstarted:
                unstarted.append((o.attempt.job.id, o.attempt.job.attempt_id))
            elif o.error is not None:
                failures.append(o)
            else:
                successes.append(
                    state.Success(
                        o.attempt.job.id, o.attempt.job.attempt_id, o.result, o.finished_at
                    )
                )
        offers = self._hand_back(handed_back, unstarted) + self._fail(failures)
        if successes:
            report = state.complete(successes, self.worker_id)
            for refused in report.refused:
                logger.info("outcome of job %s refused: its claim was lost", refused.job_id)
            if logger.isEnabledFor(logging.DEBUG):
                transaction.on_commit(partial(_log_successes, successes, report.completed))
            offers += [
                ScheduledJob.from_row(
                    {**job, "run_at": datetime.fromisoformat(job["scheduled_at"]) + TRUNCATION}
                )
                for job in report.created
            ]
            if report.released:
                released, _ = runnable_jobs(limit=len(report.released), job_ids=report.released)
                offers += released
        return offers

    def _hand_back(
        self, outcomes: Sequence[Outcome], lost: Sequence[tuple[uuid.UUID, uuid.UUID]]
    ) -> list[ScheduledJob]:
        """Undo the claims of jobs never started here; the jobs, runnable again. Those whose
        claim was `lost` meanwhile (job id, attempt id), and those a hand-back finds lost,
        get attempts that say they never started, if a cancel took them."""
        report = state.hand_back([(o.attempt.job.id, o.attempt.job.attempt_id) for o in outcomes])
        for job_id, _ in report.refused:
            logger.info("hand-back of job %s refused: its claim was lost", job_id)
        state.note_unstarted([*lost, *report.refused])
        return [ScheduledJob.from_row(row) for row in report.returned]

    def _fail(self, outcomes: Sequence[Outcome]) -> list[ScheduledJob]:
        """Record the failures; the jobs that wait for a retry."""
        failures = []
        for outcome in outcomes:
            job = outcome.attempt.job
            error, record = outcome.error, outcome.error_record
            assert error is not None and record is not None  # noqa: S101 - failures only
            failures.append(
                state.Failure(
                    job.id,
                    job.attempt_id,
                    error_type=record.error_type,
                    error_message=record.error_message,
                    stack_trace=record.stack_trace,
                    retry_delay=wait_after(
                        error,
                        attempt_number=job.attempt_number,
                        rng=self._rng,
                        base_seconds=settings.SCHEDULER_BACKOFF_BASE_SECONDS,
                    ),
                    finished_at=outcome.finished_at,
                )
            )
        report = state.fail(failures)
        for refused in report.refused:
            logger.info("outcome of job %s refused: its claim was lost", refused.job_id)
        transaction.on_commit(partial(_log_failures, failures, report.failed))
        retry_at = {str(f.job_id): f.finished_at + f.retry_delay for f in failures}
        return [
            ScheduledJob.from_row({**job, "run_at": retry_at[job["id"]]})
            for job in report.failed
            if job["status"] == JobStatus.FAILED and not job["in_dlq"]
        ]


def _log_failures(failures: Sequence[state.Failure], failed: Sequence[state.JobObject]) -> None:
    errors = {str(f.job_id): f for f in failures}
    for job in failed:
        failure = errors[job["id"]]
        logger.warning(
            "job %s (%s) attempt %d of %d failed: %s; %s",
            job["id"],
            job["type"],
            job["attempt_count"],
            job["max_retries"],
            error_summary(failure.error_type, failure.error_message),
            (
                "no attempt left: in the dead-letter queue"
                if job["in_dlq"]
                else f"cancelled: {job['last_error']}"
                if job["status"] == JobStatus.CANCELLED
                else f"retry at {job['next_retry_at']}"
            ),
            extra={
                **_job_fields(job, failure.attempt_id),
                "error_type": failure.error_type,
                "retry_at": job["next_retry_at"],
                "in_dlq": job["in_dlq"],
            },
        )


def _log_successes(
    successes: Sequence[state.Success], completed: Sequence[state.JobObject]
) -> None:
    attempt_ids = {str(s.job_id): s.attempt_id for s in successes}
    for job in completed:
        logger.debug(
            "job %s (%s) attempt %d succeeded",
            job["id"],
            job["type"],
            job["attempt_count"],
            extra=_job_fields(job, attempt_ids[job["id"]]),
        )


def _job_fields(job: state.JobObject, attempt_id: uuid.UUID) -> dict[str, Any]:
    """The fields of a line about an attempt, named as a handler's own lines name them
    (`worker.processor`), so that one query of the JSON log finds both."""
    return {
        "job_id": job["id"],
        "attempt_id": str(attempt_id),
        "job_type": job["type"],
        "attempt_number": job["attempt_count"],
    }


def _close_connection() -> None:
    """This thread's connection (Django's are per thread): broken, or no longer needed."""
    try:
        connection.close()
    except DATABASE_ERRORS:
        logger.debug("closing the completer's connection failed", exc_info=True)
