"""Backoff and the failure decision: pure functions, pinned with a seeded random source."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from jobs.registry import RetryAfter
from worker.backoff import JITTER, retry_delay
from worker.outcome import HandlerTimeout, record_of, wait_after


def delay_bounds(attempt: int) -> tuple[float, float]:
    """The band of waits after failed attempt `attempt`, from the rule in the docstring."""
    nominal = 5.0 ** (attempt - 1)
    return nominal * (1 - JITTER), nominal * (1 + JITTER)


class FixedRandom(random.Random):
    """`uniform(a, b)` returns the point at `fraction` of the way from a to b."""

    def __init__(self, fraction: float) -> None:
        super().__init__()
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction


@pytest.mark.parametrize(
    ("attempt", "fraction", "seconds"),
    [
        (1, 0.0, 0.8),
        (1, 0.5, 1.0),
        (1, 1.0, 1.2),
        (2, 0.0, 4.0),
        (2, 0.5, 5.0),
        (2, 1.0, 6.0),
        (3, 0.5, 25.0),
        (4, 0.0, 100.0),
        (5, 1.0, 750.0),
    ],
)
def test_delay_is_five_to_the_n_minus_one_times_jitter(attempt, fraction, seconds):
    assert retry_delay(attempt, FixedRandom(fraction)) == pytest.approx(
        timedelta(seconds=seconds), abs=timedelta(microseconds=1)
    )


@pytest.mark.parametrize("attempt", [1, 2, 3, 6])
def test_random_delays_stay_in_their_band_and_spread_across_it(attempt):
    rng = random.Random(attempt)
    low, high = delay_bounds(attempt)
    delays = [retry_delay(attempt, rng).total_seconds() for _ in range(2000)]
    assert all(low <= d <= high for d in delays)
    # Jitter spreads retries over the band: both ends are reached, not one fixed value.
    assert min(delays) < low + (high - low) * 0.05
    assert max(delays) > high - (high - low) * 0.05


def test_base_is_configurable():
    assert retry_delay(3, FixedRandom(0.5), base_seconds=2) == timedelta(seconds=4)


def test_a_wait_is_never_longer_than_a_year_whatever_the_base():
    assert retry_delay(10, FixedRandom(0.5), base_seconds=60) == RetryAfter.LONGEST


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_numbers_start_at_one(attempt):
    with pytest.raises(ValueError, match="start at 1"):
        retry_delay(attempt, random.Random())


def raise_and_catch(error: Exception) -> Exception:
    try:
        raise error
    except Exception as caught:
        return caught


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_a_failure_waits_the_backoff_of_its_attempt(attempt):
    wait = wait_after(
        raise_and_catch(ValueError("boom")), attempt_number=attempt, rng=FixedRandom(0.5)
    )
    assert wait == timedelta(seconds=5 ** (attempt - 1))


def test_failure_records_type_message_and_trace():
    failure = record_of(raise_and_catch(KeyError("missing")))
    assert failure.error_type == "KeyError"
    assert failure.error_message == "'missing'"
    assert failure.stack_trace is not None
    assert "raise_and_catch" in failure.stack_trace


def test_a_timeout_without_traceback_and_an_empty_message_are_still_described():
    failure = record_of(HandlerTimeout(""))
    assert (failure.error_type, failure.error_message, failure.stack_trace) == (
        "HandlerTimeout",
        "HandlerTimeout",
        None,
    )


def test_huge_messages_are_cut_saying_so_and_the_trace_keeps_its_frames():
    failure = record_of(raise_and_catch(RuntimeError("x" * 10_000)))
    assert failure.error_message == "x" * 4000 + "… (6,000 characters cut)"
    assert failure.stack_trace is not None
    assert "in raise_and_catch" in failure.stack_trace
    assert failure.stack_trace.endswith("… (6,014 characters cut)\n")


def test_a_handler_asking_to_be_retried_later_waits_exactly_that():
    error = raise_and_catch(RetryAfter(90, "the API is busy"))
    assert wait_after(error, attempt_number=2, rng=FixedRandom(0)) == timedelta(seconds=90)
    failure = record_of(error)
    assert (failure.error_type, failure.error_message) == ("RetryAfter", "the API is busy")
    assert str(RetryAfter(1.5)) == "retry after 1.5 s"


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), True, "5", 366 * 86400])
def test_retry_after_takes_a_positive_number_of_seconds_up_to_a_year(seconds):
    with pytest.raises(ValueError, match="RetryAfter takes a number of seconds"):
        RetryAfter(seconds)
