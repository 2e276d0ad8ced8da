"""The after-commit seam between the state machine and everything that reacts to it.

A transition hands its domain events to `emit_after_commit` inside its transaction; once
that transaction commits, every subscriber receives the whole batch in one call, in the
order they subscribed (a rolled-back transaction delivers nothing). `jobs.state` names no
subscriber: `JobsConfig.ready()` subscribes the Redis publisher, the stats counters and the
webhooks, and any other app may add its own (metrics) the same way.

A batch rather than one call per event, so that a worker's completion of hundreds of jobs
costs each subscriber one call (one Redis command, one webhook lookup). A subscriber that
raises is logged and skipped: the transition is already committed, and the others still
hear of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from . import audit

logger = logging.getLogger(__name__)

# ("job.completed", job object): the type of a domain event and the job it is about.
Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Batch:
    """The events of one committed transition, in order. `counts_changed` says whether the
    per-status counters moved, which bulk creations and purges do without a job event."""

    events: Sequence[Event]
    counts_changed: bool


Subscriber = Callable[[Batch], object]


class Notifier:
    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add `subscriber` (idempotent: `ready()` may run more than once in tests)."""
        if subscriber not in self._subscribers:
            self._subscribers.append(subscriber)

    def emit_after_commit(
        self, events: Sequence[Event], *, counts_changed: bool | None = None
    ) -> None:
        """Deliver `events` once the current transaction commits (at once outside one).

        `counts_changed` defaults to "there are events"."""
        batch = Batch(events, bool(events) if counts_changed is None else counts_changed)
        if batch.events or batch.counts_changed:
            transaction.on_commit(lambda: self.deliver(batch))

    def deliver(self, batch: Batch) -> None:
        # What subscribers do (webhook deliveries are jobs) is the system's work, not the
        # operator's whose request committed the batch.
        with audit.acting(None):
            self._deliver(batch)

    def _deliver(self, batch: Batch) -> None:
        for subscriber in tuple(self._subscribers):
            try:
                subscriber(batch)
            except Exception:
                logger.exception("subscriber %r failed on %d events", subscriber, len(batch.events))


notifier = Notifier()
