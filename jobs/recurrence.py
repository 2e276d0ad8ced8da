"""Recurrence: when a recurring job's next run is due, behind one interface.

`jobs.state.complete` asks the job's recurrence for `next_run(job, after)` once the run
completed, and creates that run in the same transaction (once: `previous_run_id` is
unique). A new kind of schedule (a cron expression in a time zone) is one more class here
and one more branch in `recurrence_of`; the completion statement does not change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from .models import RecurInterval


@dataclass(frozen=True)
class RecurringRun:
    """What a recurrence reads of the run that just completed."""

    scheduled_at: datetime
    recur_interval: str | None


class Recurrence(Protocol):
    def next_run(self, job: RecurringRun, after: datetime) -> datetime | None:
        """The next run's time, later than `job.scheduled_at` and not before `after`; None
        when the series ends."""
        ...


@dataclass(frozen=True)
class IntervalRecurrence:
    """Every `step` from the first run's `scheduled_at`. Slots missed while the job was
    waiting or running are skipped, not caught up: the next run is the first slot at or
    after `after`."""

    step: timedelta

    def next_run(self, job: RecurringRun, after: datetime) -> datetime | None:
        steps = max(1, math.ceil((after - job.scheduled_at) / self.step))
        return job.scheduled_at + steps * self.step


INTERVALS = {
    RecurInterval.EVERY_1_MINUTE: IntervalRecurrence(timedelta(minutes=1)),
    RecurInterval.EVERY_5_MINUTES: IntervalRecurrence(timedelta(minutes=5)),
    RecurInterval.EVERY_1_HOUR: IntervalRecurrence(timedelta(hours=1)),
}


def recurrence_of(job: RecurringRun) -> Recurrence | None:
    """The job's recurrence, or None for a one-off job."""
    if job.recur_interval is None:
        return None
    return INTERVALS[RecurInterval(job.recur_interval)]
