"""The virtual deadline that orders jobs (`jobs.scheduling`), against engine.md's stepped
score and its continuous form, both written here from the spec as oracles."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.scheduling import virtual_deadline

READY = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def minutes_waiting(ready_at: datetime, now: datetime) -> float:
    return (now - ready_at) / timedelta(minutes=1)


def score(priority: int, ready_at: datetime, now: datetime) -> float:
    """engine.md: `max(0, priority - floor(minutes_waiting / 10) * 0.5)`, lower is more
    urgent; a job not yet runnable has waited 0 minutes."""
    return max(0.0, priority - math.floor(max(0.0, minutes_waiting(ready_at, now)) / 10) * 0.5)


def continuous_score(priority: int, ready_at: datetime, now: datetime) -> float:
    """The score without its steps or its floor: `priority - minutes_waiting / 20`."""
    return priority - minutes_waiting(ready_at, now) / 20


def at(minutes: float) -> datetime:
    return READY + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("priority", "waited", "expected"),
    [
        (1, 0, 1.0),
        (3, 0, 3.0),
        (3, 9.99, 3.0),  # the step has not come yet
        (3, 10, 2.5),
        (3, 40, 1.0),  # the spec's anchor: a priority-3 job after 40 min ranks as a fresh 1
        (2, 25, 1.0),
        (1, 20, 0.0),
        (1, 120, 0.0),  # never below 0
        (2, -30, 2.0),  # not yet runnable: it has waited nothing
    ],
)
def test_seed_score_table(priority: int, waited: float, expected: float) -> None:
    assert score(priority, READY, at(waited)) == expected


def test_continuous_score_keeps_the_anchor_and_goes_below_zero() -> None:
    assert continuous_score(3, READY, at(40)) == continuous_score(1, READY, at(0)) == 1.0
    assert continuous_score(1, READY, at(60)) == -2.0
    assert continuous_score(2, READY, at(-20)) == 3.0


@given(priority=st.integers(1, 3), steps=st.integers(0, 6))
def test_both_scores_agree_at_every_ten_minutes_while_positive(priority: int, steps: int) -> None:
    now = at(10 * steps)
    expected = priority - steps * 0.5
    assert score(priority, READY, now) == max(0.0, expected)
    assert continuous_score(priority, READY, now) == expected


def test_virtual_deadline_is_twenty_minutes_per_priority_level() -> None:
    assert virtual_deadline(1, READY) == at(20)
    assert virtual_deadline(3, READY) == at(60)


@given(
    a=st.tuples(st.integers(1, 3), st.integers(0, 10**7)),
    b=st.tuples(st.integers(1, 3), st.integers(0, 10**7)),
    now_ms=st.integers(10**7, 2 * 10**7),
)
def test_deadline_order_is_continuous_score_order_at_any_moment(
    a: tuple[int, int], b: tuple[int, int], now_ms: int
) -> None:
    ready_a = READY + timedelta(milliseconds=a[1])
    ready_b = READY + timedelta(milliseconds=b[1])
    now = READY + timedelta(milliseconds=now_ms)
    by_deadline = (virtual_deadline(a[0], ready_a) > virtual_deadline(b[0], ready_b)) - (
        virtual_deadline(a[0], ready_a) < virtual_deadline(b[0], ready_b)
    )
    sa = continuous_score(a[0], ready_a, now)
    sb = continuous_score(b[0], ready_b, now)
    assert by_deadline == (sa > sb) - (sa < sb)
