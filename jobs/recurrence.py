"""Recurrence: when a recurring job's next run is due, behind one interface.

`jobs.state.complete` asks the job's recurrence for `next_run(job, after)` once the run
completed, and creates that run in the same transaction (once: `previous_run_id` is
unique, and so is a schedule's slot). Two kinds: a fixed interval (`recur_interval`) and a
cron expression in a time zone (a `Schedule`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import islice
from typing import Protocol, cast
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

from . import limits
from .models import RecurInterval, Schedule


@dataclass(frozen=True)
class RecurringRun:
    """What a recurrence reads of the run that just completed."""

    scheduled_at: datetime
    recur_interval: str | None
    # Of the run's schedule, when it is a run of a cron schedule that is not paused.
    cron: str | None = None
    timezone: str | None = None


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


@dataclass(frozen=True)
class CronRecurrence:
    """The slots of a 5-field cron expression on the wall clock of an IANA time zone. At a
    daylight-saving change, a slot in the skipped hour falls on the first minute after the
    jump (02:30 on a spring-forward day is 03:00 local; several such slots are one run
    there), and a slot in the repeated hour is taken once, at its first occurrence. This
    holds for every expression: `*/30 2 * * *` runs as `0,30 2 * * *` does, and `0 * * * *`
    as `0 0-23 * * *`: on a day that repeats 02:00-02:59 it runs 02:00 once, and 03:00 two
    hours later. A fixed pace in elapsed time is what `recur_interval` is for.

    Not Debian cron's rule, which cronsim follows with a time zone: a "wildcard job" (`*` at
    the start of the minute or hour field) runs on elapsed time there, so `*/20 2 * * *`
    got no run on a spring-forward day and `*/30 2 * * *` ran twice on a fall-back day. So
    cronsim walks the naive wall clock here, and `_instant` maps each wall time.

    Slots missed while the run was waiting (no worker) or running are skipped: the next run
    is the first slot after `after`, so a series that was stopped for a week runs its
    waiting run once and then carries on from now."""

    expression: str
    zone: ZoneInfo

    def slots(self, after: datetime) -> Iterator[datetime]:
        """Every slot strictly after `after`, in UTC, strictly increasing."""
        # Wall times map to instants in order (a later wall time never maps to an earlier
        # instant), so no slot after `after` has a wall time before `after`'s own. The
        # converse fails twice: a wall time in the repeated hour, read after its first
        # occurrence, maps to before `after`; and skipped wall times share one instant.
        last = after
        wall_clock = after.astimezone(self.zone).replace(tzinfo=None, fold=0)
        for wall_time in CronSim(self.expression, wall_clock):
            slot = self._instant(wall_time)
            if slot > last:
                yield slot
                last = slot

    def _instant(self, wall_time: datetime) -> datetime:
        """The instant, in UTC, a naive wall time of the zone runs at: its first occurrence
        when the clock shows it twice, the first minute after the jump when never."""
        while not self._exists(wall_time):
            # Gaps are whole minutes: 30 or 60 of them in today's zones.
            wall_time += timedelta(minutes=1)
        return wall_time.replace(tzinfo=self.zone, fold=0).astimezone(UTC)

    def _exists(self, wall_time: datetime) -> bool:
        # A wall time in a gap does not survive the round trip through UTC.
        local = wall_time.replace(tzinfo=self.zone)
        return local.astimezone(UTC).astimezone(self.zone).replace(tzinfo=None) == wall_time

    def next_run(self, job: RecurringRun, after: datetime) -> datetime | None:
        return next(self.slots(max(job.scheduled_at, after)), None)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        return list(islice(self.slots(after), count))


# The most of a refused time zone name its message quotes: the longest a schedule stores.
ZONE_QUOTED = cast("int", Schedule._meta.get_field("timezone").max_length)


@cache
def zone_names() -> frozenset[str]:
    """The time zones a schedule may name: the IANA names tzdata holds. Not its `localtime`,
    a copy of the reading machine's own zone: the web process and each worker could read one
    schedule on different clocks."""
    return frozenset(available_timezones()) - {"localtime"}


def cron_errors(expression: str, timezone: str) -> dict[str, list[str]]:
    """What is wrong with a cron expression and a time zone name, per field."""
    errors: dict[str, list[str]] = {}
    if timezone not in zone_names():
        errors["timezone"] = [
            f"Unknown time zone {limits.cut_text(timezone, ZONE_QUOTED)!r}: "
            "use an IANA name like Europe/Berlin."
        ]
    if not isinstance(expression, str) or len(expression.split()) != 5:
        errors["cron"] = ["Must have 5 fields: minute hour day-of-month month day-of-week."]
    else:
        try:
            if next(CronSim(expression, datetime.now(UTC)), None) is None:
                errors["cron"] = [f"{NEVER_MATCHES}."]
        except CronSimError as error:
            errors["cron"] = [_refusal(expression, error)]
    return errors


NEVER_MATCHES = "Never matches a date"


def _refusal(expression: str, error: CronSimError) -> str:
    """cronsim refuses a day that none of the months named has (`0 0 30 2 *`) in the words it
    refuses a day that no month has (`0 0 32 * *`): "Bad day-of-month", and the client looked
    for a typo in a well-formed expression. Each of the two fields is valid alone then."""
    minute, hour, day, month, weekday = expression.split()
    alone = (f"{minute} {hour} * {month} {weekday}", f"{minute} {hour} {day} * {weekday}")
    if all(_parses(each) for each in alone):
        return f"{NEVER_MATCHES}: none of its months has that day."
    return f"Not a valid cron expression: {error}."


def _parses(expression: str) -> bool:
    try:
        CronSim(expression, datetime.now(UTC))
    except CronSimError:
        return False
    return True


def recurrence_of(job: RecurringRun) -> Recurrence | None:
    """The job's recurrence, or None for a one-off job."""
    if job.cron is not None:
        return CronRecurrence(job.cron, ZoneInfo(job.timezone or "UTC"))
    if job.recur_interval is None:
        return None
    return INTERVALS[RecurInterval(job.recur_interval)]
