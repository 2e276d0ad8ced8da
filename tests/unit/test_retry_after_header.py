"""What a receiver's Retry-After header makes an http_request job wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from worker.handlers import RETRY_AFTER_LONGEST, retry_after


def http_date(delta: timedelta) -> str:
    return format_datetime(datetime.now(UTC) + delta, usegmt=True)


@pytest.mark.parametrize(
    ("header", "waits"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("999999", RETRY_AFTER_LONGEST),
        ("0", None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("²", None),
        ("", None),
        (None, None),
    ],
)
def test_delay_seconds_and_unreadable_values(header: str | None, waits: float | None):
    assert retry_after(header) == waits


def test_a_past_http_date_is_not_followed_and_a_far_one_waits_the_longest():
    assert retry_after(http_date(-timedelta(minutes=1))) is None
    assert retry_after(http_date(timedelta(days=2))) == RETRY_AFTER_LONGEST


def test_an_http_date_waits_until_then():
    waits = retry_after(http_date(timedelta(minutes=10)))
    assert waits is not None and 590 < waits <= 600
