"""How long to wait before trying a lost connection again: one rule for every reconnect
loop (the worker's database turns and writes, its LISTEN connection, the SSE hub's Redis
subscription, the event publisher's quiet period).

The wait starts at `first` (or `most` when smaller), doubles after each further failure up
to `most`, and starts over once a try succeeds. `jitter` spreads the waits of many
processes that lost the same server at once (±20% for 0.2), so they do not all come back
in the same instant.
"""

from __future__ import annotations

import random

from django.db import DatabaseError, InterfaceError

# What a reconnect loop of the database waits out and tries again: the server away, the
# connection broken, and whatever a statement met while it was. (Django's InterfaceError is
# not a DatabaseError.)
DATABASE_ERRORS = (DatabaseError, InterfaceError)


class Backoff:
    def __init__(
        self, first: float, most: float, *, jitter: float = 0.0, rng: random.Random | None = None
    ) -> None:
        if first <= 0:
            raise ValueError(f"the first wait must be positive, got {first}")
        self.first = min(first, most)
        self.most = most
        self.jitter = jitter
        self._rng = rng or random.Random()  # noqa: S311 - spreading retries, not security
        self._next = self.first

    def failed(self) -> float:
        """A try failed: how long to wait before the next one."""
        wait = self._next
        self._next = min(self.most, self._next * 2)
        if self.jitter:
            wait *= self._rng.uniform(1 - self.jitter, 1 + self.jitter)
        return wait

    def succeeded(self) -> None:
        """A try succeeded: the next failure waits `first` again."""
        self._next = self.first
