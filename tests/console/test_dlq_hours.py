"""The DLQ's "failed attempts per hour" chart on the days the clocks change and in zones
whose offset is not whole hours: one bar per real hour, named by the viewer's clock."""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.console import charts, selectors
from jobs.models import JobAttempt

from .helpers import dead_letter

pytestmark = pytest.mark.django_db


def failed_at(*moments: datetime) -> None:
    """A failed attempt that finished at each of `moments` (counted by `failure_counts`'
    triggers as any attempt is)."""
    for moment in moments:
        job = dead_letter("flaky", error="boom")
        JobAttempt.objects.filter(job_id=job["id"]).update(started_at=moment, finished_at=moment)


def hour_bars(zone: str, now: datetime) -> list[str]:
    """The bars of the chart as a viewer in `zone` reads their tooltips at `now`."""
    tz = zoneinfo.ZoneInfo(zone)
    with timezone.override(tz):
        chart = str(
            charts.time_series(
                selectors.failures_over_time(tz, now), title="Failed attempts per hour"
            )
        )
    return re.findall(r'<g class="chart-row"><title>(.*?)</title>', chart)


def test_the_hour_the_clocks_skip_has_no_bar() -> None:
    # Paris, 2026-03-29: at 01:00 UTC the clocks went from 02:00 to 03:00.
    failed_at(
        datetime(2026, 3, 29, 0, 30, tzinfo=UTC),  # 01:30 (+01)
        datetime(2026, 3, 29, 1, 10, tzinfo=UTC),  # 03:10 (+02)
        datetime(2026, 3, 29, 1, 50, tzinfo=UTC),  # 03:50 (+02)
        datetime(2026, 3, 28, 9, 20, tzinfo=UTC),  # 10:20 (+01) the day before, the first bar
    )
    bars = hour_bars("Europe/Paris", datetime(2026, 3, 29, 8, 30, tzinfo=UTC))  # 10:30 (+02)

    # A bar for 02:00, an hour that never was, stood always empty between 01:00 and 03:00,
    # and the chart began at 11:00 the day before: 23 real hours.
    assert len(bars) == 24
    assert bars[0] == "2026-03-28 10:00: 1"
    assert bars[14:17] == ["2026-03-29 00:00: 0", "2026-03-29 01:00: 1", "2026-03-29 03:00: 2"]
    assert bars[-1] == "2026-03-29 10:00: 0"


def test_the_hour_the_clocks_repeat_has_a_bar_each_time() -> None:
    # Paris, 2026-10-25: at 01:00 UTC the clocks went back from 03:00 to 02:00.
    failed_at(
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 (+02)
        datetime(2026, 10, 25, 1, 15, tzinfo=UTC),  # 02:15 (+01)
        datetime(2026, 10, 25, 1, 45, tzinfo=UTC),  # 02:45 (+01)
        datetime(2026, 10, 24, 9, 50, tzinfo=UTC),  # 11:50 (+02) the day before: 25 hours ago
    )
    bars = hour_bars("Europe/Paris", datetime(2026, 10, 25, 9, 30, tzinfo=UTC))  # 10:30 (+01)

    # Both 02:00 hours were one bar of 3, and the 24 bars covered 25 hours (from 11:00).
    assert len(bars) == 24
    assert bars[0] == "2026-10-24 12:00: 0"
    assert bars[13:17] == [
        "2026-10-25 01:00: 0",
        "2026-10-25 02:00 CEST: 1",
        "2026-10-25 02:00 CET: 2",
        "2026-10-25 03:00: 0",
    ]
    assert bars[-1] == "2026-10-25 10:00: 0"


@pytest.mark.parametrize(
    ("zone", "offset"),
    [
        ("Asia/Kolkata", timedelta(hours=5, minutes=30)),
        ("Asia/Kathmandu", timedelta(hours=5, minutes=45)),
    ],
)
def test_an_hour_is_the_viewers_clock_hour_whatever_the_zones_offset(
    zone: str, offset: timedelta
) -> None:
    tz = zoneinfo.ZoneInfo(zone)
    local = datetime(2026, 10, 25, 9, 50, tzinfo=tz)
    assert local.utcoffset() == offset
    # Ten minutes before and five after the clock's 10:00, and the last minute of its hour.
    failed_at(
        local.astimezone(UTC),
        datetime(2026, 10, 25, 10, 5, tzinfo=tz).astimezone(UTC),
        datetime(2026, 10, 25, 10, 59, tzinfo=tz).astimezone(UTC),
    )
    bars = hour_bars(zone, datetime(2026, 10, 25, 12, 5, tzinfo=tz).astimezone(UTC))

    assert len(bars) == 24
    assert bars[-4:] == [
        "2026-10-25 09:00: 1",
        "2026-10-25 10:00: 2",
        "2026-10-25 11:00: 0",
        "2026-10-25 12:00: 0",
    ]
