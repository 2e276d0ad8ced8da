"""The reconnect backoff every reconnect loop uses."""

from __future__ import annotations

import random

import pytest

from jobs.reconnect import Backoff


def test_waits_double_up_to_the_cap_and_start_over_after_a_success() -> None:
    backoff = Backoff(0.5, 3.0)
    assert [backoff.failed() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.succeeded()
    assert backoff.failed() == 0.5


def test_a_cap_below_the_first_wait_wins() -> None:
    backoff = Backoff(0.5, 0.2)
    assert [backoff.failed(), backoff.failed()] == [0.2, 0.2]


def test_jitter_stays_within_its_share_of_the_wait() -> None:
    backoff = Backoff(1.0, 1.0, jitter=0.2, rng=random.Random(7))
    waits = [backoff.failed() for _ in range(200)]
    assert all(0.8 <= wait <= 1.2 for wait in waits)
    assert max(waits) - min(waits) > 0.2  # really spread, not a constant


def test_a_first_wait_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Backoff(0, 1.0)
