"""How long a failed job waits before its next attempt.

After failed attempt n the wait is `base^(n-1)` seconds times a uniform jitter factor in
[0.8, 1.2]: about 1 s, 5 s, 25 s, ... The jitter spreads out the retries of jobs that failed
together (an outage), so they do not all come back in the same instant. A retry waits at most
what a handler may ask for (`RetryAfter.LONGEST`, a year): with a base of 60, the tenth
attempt's 60^9 s overflowed Python's dates and failed the worker's whole report.
"""

from __future__ import annotations

import random
from datetime import timedelta

from jobs.registry import RetryAfter

JITTER = 0.2


def retry_delay(attempt_number: int, rng: random.Random, *, base_seconds: float = 5.0) -> timedelta:
    """The wait after failed attempt `attempt_number` (1 for the first attempt)."""
    if attempt_number < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt_number}")
    factor = rng.uniform(1 - JITTER, 1 + JITTER)
    seconds = base_seconds ** (attempt_number - 1) * factor
    return timedelta(seconds=min(seconds, RetryAfter.LONGEST.total_seconds()))
