"""What an attempt's error becomes: the one place that turns an exception into a failure
(`record_of`, what is written of it; `wait_after`, when it is tried again).

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

# Characters kept of an error message, and of each part of a stack trace (a frame, an
# exception's message, a note): a message quoting a whole response body leaves the frames in.
ERROR_MESSAGE_LIMIT = 4000
# The exception's qualified name, as long as the column holds (a class made in a function
# is named after it: `build.<locals>.Refused`).
ERROR_TYPE_WIDTH = JobAttempt._meta.get_field("error_type").max_length
# Characters kept of a whole stack trace, its end: the innermost frames and the error.
STACK_TRACE_LIMIT = 20000


class HandlerTimeout(Exception):
    """The handler ran longer than its timeout; the attempt fails, the thread is abandoned."""


class TransactionLeftOpen(Exception):
    """The handler returned inside a transaction it entered: rolled back, the attempt fails
    (its writes there are gone, so it did not succeed)."""


@dataclass(frozen=True)
class ErrorRecord:
    """What is written of an error: its type, message and stack trace, as stored."""

    error_type: str
    error_message: str
    stack_trace: str | None


def record_of(error: BaseException) -> ErrorRecord:
    """What to write of `error`. Its message and traceback are read with `str()`, which is job
    code: call it where the error was caught (the handler's thread), so that a slow or failing
    `__str__` costs that job's thread, never the worker's report of everyone's outcomes."""
    return ErrorRecord(
        error_type=limits.storable_text(type(error).__qualname__)[:ERROR_TYPE_WIDTH],
        error_message=limits.storable_text(limits.cut_text(_message(error), ERROR_MESSAGE_LIMIT)),
        stack_trace=None if error.__traceback__ is None else _stack_trace(error),
    )


def wait_after(
    error: BaseException, *, attempt_number: int, rng: random.Random, base_seconds: float = 5.0
) -> timedelta:
    """How long the next attempt waits after `error` failed attempt `attempt_number`: the
    backoff, or what the handler asked for (`RetryAfter`)."""
    if isinstance(error, RetryAfter):
        return error.delay
    return retry_delay(attempt_number, rng, base_seconds=base_seconds)


def _stack_trace(error: BaseException) -> str:
    """The traceback as Python prints it, each part cut to ERROR_MESSAGE_LIMIT characters,
    then to its last STACK_TRACE_LIMIT."""
    parts = traceback.TracebackException.from_exception(error, compact=True).format()
    written = "".join(_cut_part(part) for part in parts)
    return limits.storable_text(limits.cut_text(written, STACK_TRACE_LIMIT, keep_end=True))


def _cut_part(part: str) -> str:
    """A part of a traceback cut, still ending with its line break (the next part starts a
    line)."""
    text = part.removesuffix("\n")
    return limits.cut_text(text, ERROR_MESSAGE_LIMIT) + part[len(text) :]


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
