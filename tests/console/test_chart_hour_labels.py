"""The names the DLQ's "failed attempts per hour" chart gives its bars, on its axis and in
each bar's tooltip: the local time each bar starts at, and never one name for two bars."""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.console import charts, selectors
from jobs.models import UserPreference

from .test_dlq_hours import failed_at

pytestmark = pytest.mark.django_db


def _words(markup: str) -> str:
    """The text of a label as it reads, its lines joined by a space."""
    return " ".join(re.sub(r"<[^>]+>", " ", markup).split())


def read_chart(chart: str) -> tuple[list[str], list[str]]:
    """The bars' tooltips, and the hours written under the bars."""
    tooltips = re.findall(r'<g class="chart-row"><title>(.*?)</title>', chart)
    axis = re.findall(r'<text class="chart-axis" x="[\d.]+%" y="\d+">(.*?)</text>', chart)
    return tooltips, [_words(label) for label in axis]


def chart_in(zone: str, now: datetime) -> tuple[list[str], list[str]]:
    tz = zoneinfo.ZoneInfo(zone)
    with timezone.override(tz):
        chart = str(
            charts.time_series(
                selectors.failures_over_time(tz, now), title="Failed attempts per hour"
            )
        )
    return read_chart(chart)


def test_a_bar_is_named_by_the_minute_it_starts_when_the_clock_moves_half_an_hour() -> None:
    # Lord Howe, 2026-10-04: at 15:30 UTC the clocks went from 02:00 (+10:30) to 02:30 (+11).
    # The bars are the clock's hours at the end of the day; before the change, they start at
    # the half hour.
    failed_at(
        datetime(2026, 10, 3, 0, 10, tzinfo=UTC),  # 10:40 (+10:30) the day before
        datetime(2026, 10, 3, 0, 50, tzinfo=UTC),  # 11:20 (+10:30)
        datetime(2026, 10, 3, 15, 20, tzinfo=UTC),  # 01:50 (+10:30), just before the change
        datetime(2026, 10, 3, 16, 5, tzinfo=UTC),  # 03:05 (+11)
    )
    tooltips, axis = chart_in("Australia/Lord_Howe", datetime(2026, 10, 3, 23, 5, tzinfo=UTC))

    # The first bar, 10:30-11:30, was named 10:00, an hour that held one of its failures at
    # most: "10:00: 2" said two failed between 10:00 and 11:00.
    assert len(tooltips) == 24
    assert tooltips[0] == "2026-10-03 10:30: 2"
    # From 01:30 (+10:30) an hour ends at 03:00 (+11): no bar is named by a time the
    # clocks skipped.
    assert tooltips[15:17] == ["2026-10-04 01:30: 1", "2026-10-04 03:00: 1"]
    assert tooltips[-1] == "2026-10-04 10:00: 0"
    assert axis == ["10:30", "13:30", "16:30", "19:30", "22:30", "01:30", "05:00", "08:00"]


def test_the_two_hours_the_clocks_repeat_are_told_apart_by_their_zone() -> None:
    # London, 2026-10-25: at 01:00 UTC the clocks went back from 02:00 BST to 01:00 GMT.
    failed_at(
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 01:30 BST
        datetime(2026, 10, 25, 1, 15, tzinfo=UTC),  # 01:15 GMT
        datetime(2026, 10, 25, 1, 45, tzinfo=UTC),  # 01:45 GMT
    )
    tooltips, axis = chart_in("Europe/London", datetime(2026, 10, 25, 9, 30, tzinfo=UTC))

    # Both were "2026-10-25 01:00": hovering them, an operator could not tell which came first.
    assert tooltips[13:17] == [
        "2026-10-25 00:00: 0",
        "2026-10-25 01:00 BST: 1",
        "2026-10-25 01:00 GMT: 2",
        "2026-10-25 02:00: 0",
    ]
    # Only the repeated hour carries its zone; the other hours read as they always did.
    assert axis == ["11:00", "14:00", "17:00", "20:00", "23:00", "01:00 GMT", "04:00", "07:00"]


def test_a_repeated_half_hour_is_named_with_its_zone() -> None:
    # Lord Howe, 2026-04-05: at 15:00 UTC the clocks went back from 02:00 (+11) to 01:30
    # (+10:30), so 01:30 to 02:00 happened twice.
    failed_at(datetime(2026, 4, 4, 14, 40, tzinfo=UTC))  # 01:40 (+11)
    tooltips, _ = chart_in("Australia/Lord_Howe", datetime(2026, 4, 4, 23, 35, tzinfo=UTC))

    assert tooltips[13:17] == [
        "2026-04-05 00:30: 0",
        "2026-04-05 01:30 +11: 1",
        "2026-04-05 02:00: 0",
        "2026-04-05 03:00: 0",
    ]


# Zones that keep one offset all year: the page's 24 hours, which end now, see no change.
@pytest.mark.parametrize("zone", ["Asia/Kolkata", "Asia/Kathmandu", "Asia/Tokyo"])
def test_the_dlq_page_names_the_viewers_clock_hours(
    as_viewer: Client, viewer: Any, zone: str
) -> None:
    UserPreference.objects.create(user=viewer, time_zone=zone)
    failed = timezone.now()
    failed_at(failed)
    body = as_viewer.get("/dlq").content.decode()
    (chart,) = re.findall(r'<svg class="chart chart-columns".*?</svg>', body, re.S)
    tooltips, axis = read_chart(chart)

    # The hours are the viewer's clock's, from its :00, whatever the zone's offset.
    hour = timezone.localtime(failed, zoneinfo.ZoneInfo(zone)).strftime("%Y-%m-%d %H:00")
    assert f"{hour}: 1" in tooltips
    assert len(axis) == 8 and all(re.fullmatch(r"\d\d:00", label) for label in axis)
