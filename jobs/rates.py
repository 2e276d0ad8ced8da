"""Rates written as DRF writes them, such as "10/min": a count per second, minute, hour or day.
Read by the settings (a rate that cannot be read stops the start) and by the API's limits."""

from __future__ import annotations

PERIOD_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """(count, seconds) of a rate such as "10/min" (only the period's first letter counts,
    as in DRF); ValueError when it is not one."""
    count, slash, period = rate.partition("/")
    try:
        number = int(count)
    except ValueError:
        number = 0
    seconds = PERIOD_SECONDS.get(period.strip()[:1])
    if not slash or number < 1 or seconds is None:
        raise ValueError("expected a count of 1 or more per s, min, hour or day, like 10/min")
    return number, seconds
