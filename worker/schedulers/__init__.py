"""In-memory schedulers of the worker: which due job runs next.

Two drop-in structures behind `JobScheduler`, chosen with `runworker --scheduler`:

    scheduler = make_scheduler("heap")            # or "skiplist"
    scheduler.insert(ScheduledJob.from_row(row))  # row: id, priority, run_at, created_at
    entry = scheduler.pop()                       # most urgent; IndexError when empty
"""

from __future__ import annotations

from .base import JobScheduler, ScheduledJob, SortKey
from .heap import MinHeapScheduler
from .skiplist import SkipListScheduler

SCHEDULERS: dict[str, type[JobScheduler]] = {
    MinHeapScheduler.name: MinHeapScheduler,
    SkipListScheduler.name: SkipListScheduler,
}


def make_scheduler(name: str = "heap") -> JobScheduler:
    """A new empty scheduler: "heap" (the default) or "skiplist"."""
    try:
        return SCHEDULERS[name]()
    except KeyError:
        raise ValueError(
            f"Unknown scheduler {name!r}; choose one of: {', '.join(SCHEDULERS)}."
        ) from None


__all__ = [
    "SCHEDULERS",
    "JobScheduler",
    "MinHeapScheduler",
    "ScheduledJob",
    "SkipListScheduler",
    "SortKey",
    "make_scheduler",
]
