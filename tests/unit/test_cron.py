"""Cron recurrence: the slots of a 02:30 daily job across the daylight-saving changes of
Europe/Berlin and America/New_York, the missed-slot policy, and what is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
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


# --- every expression keeps the rule, steps and wildcards too -------------------------------
#
# cronsim follows Debian cron, which applies the rule above only to a "fixed-time" job (no
# `*` at the start of the minute or hour field): `*/20 2 * * *` then skipped its whole
# spring-forward day and `*/30 2 * * *` ran 02:00 and 02:30 twice on the fall-back day,
# while `0,20,40 2 * * *` and `0,30 2 * * *` did what the README promises.


def local_runs(cron: str, zone: str, after: datetime, count: int) -> list[str]:
    """The local times of a schedule's next `count` runs after `after`, read in `zone`."""
    tz = ZoneInfo(zone)
    runs = CronRecurrence(cron, tz).upcoming(after.replace(tzinfo=tz), count)
    assert all(run.tzinfo is UTC for run in runs)
    return [run.astimezone(tz).strftime("%m-%d %H:%M %Z") for run in runs]


def test_a_step_in_the_skipped_hour_runs_once_at_the_first_minute_after_the_jump():
    # Berlin, 2026-03-29: 02:00 CET -> 03:00 CEST. 02:00, 02:20 and 02:40 do not exist;
    # all three fall on 03:00, which is one run.
    assert local_runs("*/20 2 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12), 3) == [
        "03-29 03:00 CEST",
        "03-30 02:00 CEST",
        "03-30 02:20 CEST",
    ]


def test_a_step_in_the_repeated_hour_runs_once_at_its_first_occurrence():
    # Berlin, 2026-10-25: 03:00 CEST -> 02:00 CET, so 02:00-02:59 happens twice.
    assert local_runs("*/30 2 * * *", "Europe/Berlin", datetime(2026, 10, 24, 12), 3) == [
        "10-25 02:00 CEST",
        "10-25 02:30 CEST",
        "10-26 02:00 CET",
    ]


def test_a_step_in_new_yorks_repeated_hour_runs_once_at_its_first_occurrence():
    # New York, 2026-11-01: 02:00 EDT -> 01:00 EST, so 01:00-01:59 happens twice.
    assert local_runs("*/30 1-3 * * *", "America/New_York", datetime(2026, 10, 31, 12), 6) == [
        "11-01 01:00 EDT",
        "11-01 01:30 EDT",
        "11-01 02:00 EST",
        "11-01 02:30 EST",
        "11-01 03:00 EST",
        "11-01 03:30 EST",
    ]


def test_a_step_in_new_yorks_skipped_hour_runs_once_at_the_first_minute_after_the_jump():
    # New York, 2026-03-08: 02:00 EST -> 03:00 EDT. 02:00 and 02:30 fall on 03:00, as does
    # the 03:00 slot itself: one run there.
    assert local_runs("*/30 1-3 * * *", "America/New_York", datetime(2026, 3, 7, 12), 5) == [
        "03-08 01:00 EST",
        "03-08 01:30 EST",
        "03-08 03:00 EDT",
        "03-08 03:30 EDT",
        "03-09 01:00 EDT",
    ]


def test_every_hour_runs_the_repeated_hour_once():
    # `0 * * * *` is `0 0-23 * * *`: 02:00 is a slot of the wall clock like any other, taken
    # at its first occurrence. Two hours pass between the runs at 02:00 CEST and 03:00 CET:
    # the series follows the wall clock, not elapsed time (that is `recur_interval`).
    tz = ZoneInfo("Europe/Berlin")
    runs = CronRecurrence("0 * * * *", tz).upcoming(datetime(2026, 10, 25, 0, 30, tzinfo=tz), 4)
    assert runs == [
        datetime(2026, 10, 24, 23, 0, tzinfo=UTC),  # 01:00 CEST
        datetime(2026, 10, 25, 0, 0, tzinfo=UTC),  # 02:00 CEST
        datetime(2026, 10, 25, 2, 0, tzinfo=UTC),  # 03:00 CET
        datetime(2026, 10, 25, 3, 0, tzinfo=UTC),  # 04:00 CET
    ]


def test_every_hour_across_the_skipped_hour_runs_at_03_00_once():
    assert local_runs("0 * * * *", "Europe/Berlin", datetime(2026, 3, 29, 0, 30), 3) == [
        "03-29 01:00 CET",
        "03-29 03:00 CEST",
        "03-29 04:00 CEST",
    ]


CHANGE_DAYS = [
    ("Europe/Berlin", datetime(2026, 3, 28, 12)),
    ("Europe/Berlin", datetime(2026, 10, 24, 12)),
    ("America/New_York", datetime(2026, 3, 7, 12)),
    ("America/New_York", datetime(2026, 10, 31, 12)),
]


@pytest.mark.parametrize(("zone", "day_before"), CHANGE_DAYS)
@pytest.mark.parametrize(
    ("cron", "same_slots"),
    [
        ("*/20 2 * * *", "0,20,40 2 * * *"),
        ("*/30 2 * * *", "0,30 2 * * *"),
        ("*/30 1-3 * * *", "0,30 1,2,3 * * *"),
        ("0 * * * *", "0 0-23 * * *"),
        ("*/15 * * * *", "0,15,30,45 0-23 * * *"),
        ("* 1-3 * * *", "0-59 1,2,3 * * *"),
    ],
)
def test_expressions_with_the_same_slots_give_the_same_runs(zone, day_before, cron, same_slots):
    # 300 runs from noon the day before the change: its whole day at least, each time.
    after = day_before.replace(tzinfo=ZoneInfo(zone))
    runs = CronRecurrence(cron, ZoneInfo(zone)).upcoming(after, 300)
    assert runs == CronRecurrence(same_slots, ZoneInfo(zone)).upcoming(after, 300)
    assert all(earlier < later for earlier, later in pairwise(runs))


@pytest.mark.parametrize("cron", ["0,30 2 * * *", "*/30 2 * * *", "30 2 * * *"])
def test_a_completion_in_the_second_occurrence_of_the_repeated_hour_looks_ahead(cron):
    # A run completed at 02:10 CET, in the repeated hour after its first occurrence (02:00
    # to 02:59 CEST) ended. The day's 02:30 already happened, at 02:30 CEST: the next run is
    # tomorrow's, never a time before the completion.
    tz = ZoneInfo("Europe/Berlin")
    completed_at = datetime(2026, 10, 25, 2, 10, tzinfo=tz, fold=1)
    assert completed_at.tzname() == "CET"
    run = RecurringRun(datetime(2026, 10, 25, 2, 0, tzinfo=tz), None)
    next_run = CronRecurrence(cron, tz).next_run(run, completed_at)
    assert next_run is not None and next_run > completed_at
    expected = datetime(2026, 10, 26, 2, 0 if cron != "30 2 * * *" else 30, tzinfo=tz)
    assert next_run == expected
