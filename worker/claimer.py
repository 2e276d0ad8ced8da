"""Claims sent ahead: one thread with its own database connection that runs the claims a busy
loop hands it, so that the loop takes outcomes and starts attempts while a claim is on its
way.

With short handlers the loop's own work per job (starting an attempt, taking its outcome)
and a claim's time on the server came one after the other, each about half of a job's
time. Now, while the jobs of one claim are being run, the next claim is already on the
server (`Processor.claim_room`: at most half the prefetch waits when it is sent), and its
jobs are started as soon as it is back.

One claim at a time: the loop sends the next only once it took the last one's result,
("claimed", (entries, jobs)) on its inbox, or ("claimed", (entries, error)) when the
statement failed (the entries go back into the scheduler and the loop backs off). An idle
worker's claim never comes here: the loop makes it on its own connection, with no thread
hop on the start latency's path.
"""

from __future__ import annotations

import logging
import uuid
from queue import SimpleQueue
from typing import Any

from django.db import connection

from jobs import state
from jobs.queue_names import QueueSelection
from jobs.reconnect import DATABASE_ERRORS

from .schedulers import ScheduledJob
from .threads import forget_queries, loop_thread

logger = logging.getLogger(__name__)


class Claimer:
    def __init__(self, worker_id: uuid.UUID, queues: QueueSelection, inbox: SimpleQueue[Any]):
        self.worker_id = worker_id
        self.queues = queues
        self._inbox = inbox
        self._requests: SimpleQueue[list[ScheduledJob] | None] = SimpleQueue()
        self._thread = loop_thread(self._run, "claimer", inbox)

    def start(self) -> None:
        self._thread.start()

    def submit(self, entries: list[ScheduledJob]) -> None:
        self._requests.put(entries)

    def stop(self, timeout: float | None = None) -> None:
        """End once the claim on its way (if any) is back in the inbox."""
        self._requests.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (entries := self._requests.get()) is not None:
            result: list[state.ClaimedJob] | Exception
            try:
                result = state.claim(
                    self.worker_id, len(entries), [e.job_id for e in entries], self.queues
                )
            except DATABASE_ERRORS as exc:
                result = exc
                _close_connection()
            self._inbox.put(("claimed", (entries, result)))
            forget_queries()
        _close_connection()


def _close_connection() -> None:
    """This thread's connection (Django's are per thread): broken, or no longer needed."""
    try:
        connection.close()
    except DATABASE_ERRORS:
        logger.debug("closing the claimer's connection failed", exc_info=True)
