"""The threads the loop depends on (claimer, completer, listener). One that ends by an error
its own code does not handle tells the loop, which stops the worker by force (exit code 1)
for its supervisor to restart, returning its running jobs to pending: a worker whose
completer had died would go on claiming jobs whose outcomes it could never record."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from django.conf import settings
from django.db import reset_queries

logger = logging.getLogger(__name__)


def loop_thread(target: Callable[[], None], name: str, inbox: SimpleQueue[Any]) -> threading.Thread:
    """A daemon thread running `target` that posts ("crashed", name) to `inbox` should
    `target` raise."""

    def run() -> None:
        try:
            target()
        except BaseException:
            logger.critical(
                "the worker's %s thread failed: stopping the worker", name, exc_info=True
            )
            inbox.put(("crashed", name))

    return threading.Thread(target=run, name=name, daemon=True)


def forget_queries() -> None:
    """Empty this thread's query logs, as the start of each web request does. With DEBUG on,
    Django keeps a connection's last 9,000 statements, and nothing in a worker ever cleared
    them: a worker started with the defaults grew by hundreds of MB (its completer's
    statements carry log lines and tracebacks). Each worker thread calls it once a pass."""
    if settings.DEBUG:
        reset_queries()
