"""What a handler receives: its job's payload, a logger into `job_logs`, and a cancel flag."""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any


class JobCancelled(Exception):
    """Raised by `raise_if_cancelled()` once the job was cancelled while running."""


@dataclass
class JobContext:
    id: uuid.UUID
    type: str
    payload: dict[str, Any]
    attempt_id: uuid.UUID
    attempt_number: int
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    cancel_event: threading.Event = field(default_factory=threading.Event)

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def raise_if_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise JobCancelled(f"job {self.id} was cancelled")
