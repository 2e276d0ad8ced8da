"""Recurrence: the next run of an interval series after a completion, and the slots of a
daily cron schedule across the daylight-saving changes of Europe/Paris."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobs.models import RecurInterval
from jobs.recurrence import (
    INTERVALS,
    CronRecurrence,
    IntervalRecurrence,
    RecurringRun,
    recurrence_of,
)

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
FIVE = IntervalRecurrence(timedelta(minutes=5))


@pytest.mark.parametrize(
    ("completed_after", "next_run"),
    [
        (timedelta(seconds=1), timedelta(minutes=5)),  # on time: the next slot
        (timedelta(minutes=-1), timedelta(minutes=5)),  # ran early: still the next slot
        (timedelta(minutes=5), timedelta(minutes=5)),  # exactly on a slot: that slot
        (timedelta(minutes=12), timedelta(minutes=15)),  # late: missed slots are skipped
    ],
)
def test_the_next_run_is_the_first_slot_not_before_the_completion(
    completed_after: timedelta, next_run: timedelta
) -> None:
    run = RecurringRun(START, RecurInterval.EVERY_5_MINUTES)
    assert FIVE.next_run(run, START + completed_after) == START + next_run


def test_each_interval_choice_has_its_recurrence_and_one_off_jobs_have_none() -> None:
    assert set(INTERVALS) == set(RecurInterval)
    assert recurrence_of(RecurringRun(START, "every_1_hour")) == IntervalRecurrence(
        timedelta(hours=1)
    )
    assert recurrence_of(RecurringRun(START, None)) is None


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        # 2027-03-28, 02:00 CET -> 03:00 CEST: no 02:30 that day. Run once at 03:00, as
        # Vixie cron and cronie run a job of the skipped hour right after the jump.
        ("2027-03-26 12:00", ["03-27 02:30 CET", "03-28 03:00 CEST", "03-29 02:30 CEST"]),
        # 2027-10-31, 03:00 CEST -> 02:00 CET: 02:30 comes twice. Run once, the first time.
        ("2027-10-29 12:00", ["10-30 02:30 CEST", "10-31 02:30 CEST", "11-01 02:30 CET"]),
    ],
)
def test_a_daily_0230_paris_schedule_runs_once_a_day_across_the_changes(after, expected):
    paris = ZoneInfo("Europe/Paris")
    start = datetime.fromisoformat(after).replace(tzinfo=paris)
    runs = CronRecurrence("30 2 * * *", paris).upcoming(start, 3)
    assert [run.astimezone(paris).strftime("%m-%d %H:%M %Z") for run in runs] == expected
