"""Priority with aging, as a score for people and as a fixed key for the schedulers.

engine.md seeds `score = max(0, priority - floor(minutes_waiting / 10) * 0.5)`, lower is more
urgent. Its steps make two jobs swap places back and forth as time passes, which no structure
with fixed keys can follow. The continuous form `priority - minutes_waiting / 20` goes through
the same anchor points, and since `minutes_waiting = (now - ready_at) / 1 min` it equals
`(virtual_deadline - now) / 20 min`: at every moment `now` it orders jobs exactly as the fixed
`virtual_deadline = ready_at + priority * 20 min` does. That is why the schedulers can sort on
the deadline once, at insert time.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from jobs.models import PRIORITY_WEIGHT

_MINUTE = timedelta(minutes=1)
# One priority level is worth this many minutes of waiting (20 with PRIORITY_WEIGHT = 20 min).
_WEIGHT_MINUTES = PRIORITY_WEIGHT / _MINUTE


def virtual_deadline(priority: int, ready_at: datetime) -> datetime:
    """When the job should run at the latest: earliest deadline first is priority with aging."""
    return ready_at + priority * PRIORITY_WEIGHT


def minutes_waiting(ready_at: datetime, now: datetime) -> float:
    """Minutes since the job became runnable (negative while it is still in the future)."""
    return (now - ready_at) / _MINUTE


def score(priority: int, ready_at: datetime, now: datetime) -> float:
    """The seed's stepped score, for display: lower is more urgent, never below 0.

    A job not yet runnable has waited 0 minutes, so its score is its priority.
    """
    waited = max(0.0, minutes_waiting(ready_at, now))
    return max(0.0, priority - math.floor(waited / 10) * 0.5)


def continuous_score(priority: int, ready_at: datetime, now: datetime) -> float:
    """`priority - minutes_waiting / 20`, unclamped: sorting by it at any `now` is sorting by
    `virtual_deadline`. Used to prove the schedulers' order, not shown to users."""
    return priority - minutes_waiting(ready_at, now) / _WEIGHT_MINUTES
