"""Cron recurrence: the slots of a 02:30 daily job across the daylight-saving changes of
Europe/Berlin and America/New_York, the missed-slot policy, and what is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from jobs.recurrence import CronRecurrence, RecurringRun, cron_errors, recurrence_of


def daily_0230(zone: str, day_before: datetime, count: int = 3) -> list[str]:
    """The local times of the next `count` runs after noon of `day_before`."""
    tz = ZoneInfo(zone)
    recurrence = recurrence_of(RecurringRun(day_before, None, "30 2 * * *", zone))
    assert isinstance(recurrence, CronRecurrence)
    runs, after = [], day_before.replace(tzinfo=tz)
    for _ in range(count):
        run = recurrence.next_run(RecurringRun(after, None), after)
        assert run is not None and run.tzinfo is UTC
        runs.append(run.astimezone(tz).strftime("%m-%d %H:%M %Z"))
        after = run
    return runs


@pytest.mark.parametrize(
    ("zone", "day_before", "expected"),
    [
        # Spring forward: 02:00 -> 03:00, no 02:30 that day: it runs at 03:00, once.
        ("Europe/Berlin", datetime(2026, 3, 28, 12), ["03-29 03:00 CEST", "03-30 02:30 CEST"]),
        ("America/New_York", datetime(2026, 3, 7, 12), ["03-08 03:00 EDT", "03-09 02:30 EDT"]),
        # Fall back: Berlin repeats 02:00-03:00; 02:30 runs once, at its first occurrence.
        ("Europe/Berlin", datetime(2026, 10, 24, 12), ["10-25 02:30 CEST", "10-26 02:30 CET"]),
        # New York repeats 01:00-02:00, so its 02:30 happens once anyway.
        ("America/New_York", datetime(2026, 10, 31, 12), ["11-01 02:30 EST", "11-02 02:30 EST"]),
    ],
)
def test_a_0230_daily_job_on_daylight_saving_days(zone, day_before, expected):
    assert daily_0230(zone, day_before, count=2) == expected


def test_the_repeated_hour_in_new_york_runs_once():
    tz = ZoneInfo("America/New_York")
    recurrence = CronRecurrence("30 1 * * *", tz)
    runs = recurrence.upcoming(datetime(2026, 10, 31, 12, tzinfo=tz), 2)
    assert [r.astimezone(tz).strftime("%m-%d %H:%M %Z") for r in runs] == [
        "11-01 01:30 EDT",
        "11-02 01:30 EST",
    ]


def test_slots_missed_while_no_worker_ran_are_skipped_after_the_one_run():
    recurrence = CronRecurrence("0 * * * *", ZoneInfo("UTC"))
    slot_of_the_waiting_run = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
    completed_at = datetime(2026, 6, 3, 17, 20, tzinfo=UTC)  # 65 slots later
    run = RecurringRun(slot_of_the_waiting_run, None)
    assert recurrence.next_run(run, completed_at) == datetime(2026, 6, 3, 18, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "zone", "errors"),
    [
        ("30 2 * * *", "Europe/Berlin", {}),
        (
            "30 2 * *",
            "UTC",
            {"cron": ["Must have 5 fields: minute hour day-of-month month day-of-week."]},
        ),
        (
            "0 0 * * * *",
            "UTC",
            {"cron": ["Must have 5 fields: minute hour day-of-month month day-of-week."]},
        ),
        ("61 * * * *", "UTC", {"cron": ["Not a valid cron expression: Bad minute."]}),
        (
            "* * * * *",
            "Mars/Olympus",
            {
                "timezone": [
                    "Unknown time zone 'Mars/Olympus': use an IANA name like Europe/Berlin."
                ]
            },
        ),
    ],
)
def test_what_is_refused(cron, zone, errors):
    assert cron_errors(cron, zone) == errors


def test_the_machines_own_zone_file_is_no_time_zone_name():
    # tzdata's `localtime` is whatever zone the machine reading it is set to: the web
    # process and each worker could read one schedule's slots on different clocks.
    assert cron_errors("0 9 * * *", "localtime") == {
        "timezone": ["Unknown time zone 'localtime': use an IANA name like Europe/Berlin."]
    }
