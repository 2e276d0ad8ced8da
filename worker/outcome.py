"""What an attempt's error becomes: the one place that turns an exception into a failure.

Pure: the caller passes the random source, so tests pin every branch. Whether the job is
retried or enters the dead-letter queue is decided by `jobs.state.fail` in the same guarded
statement that closes the attempt (it sees the authoritative `attempt_count`); this module
only says what to record and how long a retry would wait.
"""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass
from datetime import timedelta

from jobs import limits
from jobs.models import JobAttempt
from jobs.registry import RetryAfter

from .backoff import retry_delay

ERROR_MESSAGE_LIMIT = 4000
# The exception's qualified name, as long as the column holds (a class made in a function
# is named after it: `build.<locals>.Refused`).
ERROR_TYPE_WIDTH = JobAttempt._meta.get_field("error_type").max_length
STACK_TRACE_LIMIT = 20000


class HandlerTimeout(Exception):
    """The handler ran longer than its timeout; the attempt fails, the thread is abandoned."""


class TransactionLeftOpen(Exception):
    """The handler returned inside a transaction it entered: rolled back, the attempt fails
    (its writes there are gone, so it did not succeed)."""


@dataclass(frozen=True)
class Failure:
    error_type: str
    error_message: str
    stack_trace: str | None
    retry_delay: timedelta


def describe(
    error: BaseException,
    *,
    attempt_number: int,
    rng: random.Random,
    base_seconds: float = 5.0,
) -> Failure:
    """The failure to record for `error`, raised by attempt `attempt_number` of a job: its
    next attempt waits the backoff, or what the handler asked for (`RetryAfter`)."""
    message = limits.storable_text(_message(error))
    trace = None
    if error.__traceback__ is not None:
        written = limits.storable_text("".join(traceback.format_exception(error)))
        trace = written[-STACK_TRACE_LIMIT:]
    return Failure(
        error_type=limits.storable_text(type(error).__qualname__)[:ERROR_TYPE_WIDTH],
        error_message=message[:ERROR_MESSAGE_LIMIT],
        stack_trace=trace,
        retry_delay=(
            error.delay
            if isinstance(error, RetryAfter)
            else retry_delay(attempt_number, rng, base_seconds=base_seconds)
        ),
    )


def _message(error: BaseException) -> str:
    """The exception's message; its class name when it has none. Its `str()` is job code
    (a `__str__` of the handler's), so what it raises fails the attempt it describes, never
    the thread describing it."""
    try:
        text = str(error)
    # BaseException too: a KeyboardInterrupt or SystemExit raised there ended the
    # completer's thread, and so the worker, each time the job failed.
    except BaseException as unreadable:
        return f"(its message could not be read: str() raised {type(unreadable).__qualname__})"
    return text or type(error).__name__
