"""What handlers print. While a worker runs, `sys.stdout` and `sys.stderr` are proxies
(`attributed_output`): what a handler's thread writes there (`print`, `sys.stderr.write`, a
library's progress lines) becomes its attempt's log, one line per printed line as the job's
logger writes them (stdout at INFO, stderr at WARNING, the same bounds), and through that
logger reaches the worker's own log tagged with the job, with `stream` saying where it was
written. Printed to the bare process output, it named no job and the job's page showed
nothing of it.

What any other thread writes (the worker's loop, completer, listener; a thread a handler
started) passes through unchanged: that thread runs no attempt (`captured` marks the thread
that does, for the handler's run).

The worker's log handler writes to the stream it was given when Django configured logging,
before the proxies: the real stderr. Were it given a proxy (logging configured again later),
the job's line it writes passes straight through (`_Capture.emitting`) rather than coming back
as a printed line, without end. So does logging's report of a record it could not write (its
format refused the arguments), on stderr as from any thread: that line is lost from the
attempt's log, as Python's logging loses it, not kept as if the job had printed the report.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TextIO, cast

_LEVELS = {"stdout": logging.INFO, "stderr": logging.WARNING}
_HANDLE_ERROR = logging.Handler.handleError.__code__

# The running attempt's capture, on the thread that runs its handler.
_running = threading.local()


class _Capture:
    def __init__(self, logger: logging.LoggerAdapter[logging.Logger], line_limit: int) -> None:
        self._logger = logger
        self._line_limit = line_limit
        # What was written after the last newline, per stream: a line printed in pieces
        # (`print(..., end="")`) is one log line.
        self._pending = dict.fromkeys(_LEVELS, "")
        self.emitting = False

    def write(self, stream: str, text: str) -> None:
        *lines, rest = (self._pending[stream] + text).split("\n")
        # A line whose end never comes is held up to a log line's bound, no more: the
        # worker's memory holds no unbounded line (it is written in pieces instead).
        held = len(rest) - len(rest) % self._line_limit
        lines += [
            rest[start : start + self._line_limit] for start in range(0, held, self._line_limit)
        ]
        self._pending[stream] = rest[held:]
        for line in lines:
            self._emit(stream, line)

    def end(self) -> None:
        for stream, rest in self._pending.items():
            if rest:
                self._emit(stream, rest)

    def _emit(self, stream: str, line: str) -> None:
        extra = {**(self._logger.extra or {}), "stream": stream}
        self.emitting = True
        try:
            self._logger.logger.log(_LEVELS[stream], "%s", line, extra=extra)
        finally:
            self.emitting = False


class _AttributedStream:
    """`sys.stdout` or `sys.stderr`: what a thread running a handler writes goes to its
    attempt's log; the rest to the stream it stands for, as written."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream = stream
        self._name = name

    def write(self, text: str) -> int:
        capture: _Capture | None = getattr(_running, "capture", None)
        if capture is None or capture.emitting or self._from_logging_error():
            return self._stream.write(text)
        capture.write(self._name, text)
        return len(text)

    def _from_logging_error(self) -> bool:
        if self._name != "stderr":
            return False
        # From write's caller up: handleError writes its report itself, and through
        # `traceback` and `print`.
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if frame.f_code is _HANDLE_ERROR:
                return True
            frame = frame.f_back
        return False

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        # The rest (flush, fileno, encoding, isatty, buffer) is the real stream's.
        return getattr(self._stream, name)


@contextmanager
def attributed_output() -> Iterator[None]:
    """While it lasts, `sys.stdout` and `sys.stderr` are attributing proxies."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _AttributedStream(sys.stdout, "stdout"))
    sys.stderr = cast(TextIO, _AttributedStream(sys.stderr, "stderr"))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


@contextmanager
def captured(logger: logging.LoggerAdapter[logging.Logger], line_limit: int) -> Iterator[None]:
    """While it lasts, what this thread writes to stdout and stderr is logged to `logger` (an
    attempt's job logger): each line once ended, or once `line_limit` characters long; what
    is left unended, at the end."""
    capture = _Capture(logger, line_limit)
    _running.capture = capture
    try:
        yield
    finally:
        try:
            capture.end()
        finally:
            _running.capture = None
