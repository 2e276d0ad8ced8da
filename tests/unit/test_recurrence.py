"""Interval recurrence: the next run of a series after a completion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.models import RecurInterval
from jobs.recurrence import INTERVALS, IntervalRecurrence, RecurringRun, recurrence_of

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
