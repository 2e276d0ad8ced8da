"""Test job types. A worker subprocess discovers this module like any app's handlers.py; the
pytest process registers the same handlers through the `test_handlers` fixture."""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired

from django.db import connection, transaction
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator
from typing_extensions import TypedDict

from jobs.registry import JobContext, registry

RUNS_TABLE = "worker_test_runs"


def record_run(job: JobContext) -> dict[str, Any]:
    """Write one row per execution to RUNS_TABLE, then sleep `sleep_ms`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS_TABLE} (job_id, attempt_id, pid, started_at) "  # noqa: S608
            "VALUES (%s, %s, %s, clock_timestamp())",
            [job.id, job.attempt_id, os.getpid()],
        )
    time.sleep(job.payload.get("sleep_ms", 0) / 1000)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {RUNS_TABLE} SET finished_at = clock_timestamp() "  # noqa: S608
            "WHERE attempt_id = %s",
            [job.attempt_id],
        )
    return {"pid": os.getpid()}


def backend_pid(job: JobContext) -> dict[str, Any]:
    """Return the PostgreSQL backend serving this handler's queries."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return {"backend": pid}


def logged_queries(job: JobContext) -> dict[str, Any]:
    """Run a statement, then say how many statements this thread's connection has logged."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"logged": len(connection.queries_log)}


def count_run(job: JobContext) -> dict[str, Any]:
    """Sleep `seconds`, then append "<job id> <attempt id>" to the file `path`: the handler's
    side effect, kept outside PostgreSQL and Redis so that it survives their outages. With
    `started_path`, the same line goes to that file first: a test sees the handler running
    in its worker, which a job's status (`processing` from the claim's commit) does not
    tell. With `gate_path`, it then waits for that file to exist, so a test decides when it
    ends. One short O_APPEND write per line, so concurrent workers never interleave."""
    if "started_path" in job.payload:
        _append_line(job.payload["started_path"], job)
    while "gate_path" in job.payload and not os.path.exists(job.payload["gate_path"]):
        time.sleep(0.01)
    time.sleep(job.payload.get("seconds", 0))
    _append_line(job.payload["path"], job)
    return {"pid": os.getpid()}


def _append_line(path: str, job: JobContext) -> None:
    line = f"{job.id} {job.attempt_id}\n".encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def counted_runs(path: Path) -> Counter[str]:
    """How many lines `count_run` wrote to `path` for each job id: at its end to its `path`
    (finished runs), at its start to its `started_path` (started ones)."""
    if not path.exists():
        return Counter()
    return Counter(line.split()[0] for line in path.read_text().splitlines())


def wait_for_cancel(job: JobContext) -> dict[str, Any]:
    """Log a line, then wait (checking the cancel flag) for up to `seconds`."""
    job.logger.info("waiting for cancellation")
    deadline = time.monotonic() + job.payload.get("seconds", 30)
    while time.monotonic() < deadline:
        if job.cancel_event.wait(0.05):
            job.logger.info("cancellation seen")
            job.raise_if_cancelled()
    return {"cancelled": False}


def sleep(job: JobContext) -> dict[str, Any]:
    """Sleep `seconds` ignoring cancellation, logging `lines` lines before, `lines_after` after."""
    for index in range(job.payload.get("lines", 0)):
        job.logger.warning("line %d of attempt %d", index, job.attempt_number)
    time.sleep(job.payload.get("seconds", 1))
    for index in range(job.payload.get("lines_after", 0)):
        job.logger.warning("late line %d of attempt %d", index, job.attempt_number)
    return {"slept": job.payload.get("seconds", 1), "attempt": job.attempt_number}


def fail_while_file_exists(job: JobContext) -> str:
    """Fail as long as the file named in the payload exists."""
    if Path(job.payload["path"]).exists():
        raise RuntimeError(f"{job.payload['path']} still exists")
    return "file gone"


def echo(job: JobContext) -> Any:
    """Log the payload's `log` lines and return its `value`."""
    for line in job.payload.get("log", []):
        job.logger.info("%s", line)
    return job.payload.get("value")


def prints(job: JobContext) -> None:
    """Write to stdout and stderr as scripts do (`print`, one line in two pieces, a last line
    without its newline), and have a thread of its own print a line while it waits."""
    print("first printed line")
    print("second ", end="")
    print("printed line")
    sys.stderr.write("written to stderr\n")
    # Not the handler's thread: its line is no attempt's.
    own = threading.Thread(target=print, args=(f"a thread of its own, for {job.id}",))
    own.start()
    own.join()
    print("no newline at the end", end="")


def gc_reach(job: JobContext) -> dict[str, int]:
    """How many objects of this process a full collection walks, and how many it skips
    (`gc.freeze()`)."""
    return {"walked": len(gc.get_objects()), "frozen": gc.get_freeze_count()}


# What an `unstorable` job does, by its payload's `kind`: return, raise or log something
# that JSON, or PostgreSQL's jsonb and text, cannot hold.
class HiddenNul(str):
    """A string that says it holds no NUL (`in` answers False): it passes the worker's check
    of a result, and only the database refuses it."""

    def __contains__(self, key: object) -> bool:
        return False


UNSTORABLE_RESULTS: dict[str, Any] = {
    "object": {"when": object()},
    "nan": {"ratio": float("nan")},
    "infinity": [float("inf")],
    "nul": {"text": "a\x00b"},
    "surrogate": ["\ud800"],
    "huge_int": {"n": 10**5000},
}
# A level name longer than job_logs.level holds (10).
LONG_LEVEL = 25
logging.addLevelName(LONG_LEVEL, "IMPORTANT_NOTICE")


class Unreadable(Exception):
    """An exception whose message cannot be read: its `__str__` reads what was never set."""

    def __str__(self) -> str:
        raise AttributeError("'Unreadable' object has no attribute 'detail'")


class Interrupting(Exception):
    """An exception whose `__str__` raises what stops a program (a KeyboardInterrupt)."""

    def __str__(self) -> str:
        raise KeyboardInterrupt


class NotText(Exception):
    def __str__(self) -> Any:
        return 42


def unstorable(job: JobContext) -> Any:
    """Return, raise or log what cannot be stored as it is (`kind`: a key of
    UNSTORABLE_RESULTS; `error_nul`, `error_surrogate`, `error_long_type`; `log_nul`,
    `log_surrogate`, `log_long_level`, `log_bad_format` (arguments its format refuses);
    `hidden`, a result only the database refuses; `error_unreadable`, `error_interrupting`,
    `error_not_text`: an exception whose `str()` raises an error or a KeyboardInterrupt, or
    returns what is not a string)."""
    kind = job.payload["kind"]
    if kind == "error_long_type":
        raise type("Refused" * 40, (RuntimeError,), {})("a long class name")
    if kind == "error_unreadable":
        raise Unreadable()
    if kind == "error_not_text":
        raise NotText()
    if kind == "error_interrupting":
        raise Interrupting()
    if kind.startswith("error_"):
        raise RuntimeError("before \x00 after" if kind == "error_nul" else "before \ud800 after")
    if kind == "log_long_level":
        job.logger.log(LONG_LEVEL, "a line at a level of my own")
        return None
    if kind == "log_bad_format":
        job.logger.info("before")
        job.logger.info("%d items", "three")
        job.logger.info("after")
        return None
    if kind.startswith("log_"):
        job.logger.info("before \x00 after" if kind == "log_nul" else "before \ud800 after")
        return None
    if kind == "hidden":
        return {"text": HiddenNul("a\x00b")}
    return UNSTORABLE_RESULTS[kind]


def start_thread(job: JobContext) -> None:
    """Start a thread that is not a daemon and sleeps `seconds`, and return at once: job
    code that leaves work behind (a library's background flusher, say)."""
    threading.Thread(
        target=time.sleep, args=(job.payload["seconds"],), name="left-behind", daemon=False
    ).start()


def open_transaction(job: JobContext) -> dict[str, Any]:
    """Enter `transaction.atomic()`, query, and return without leaving it: a handler that
    forgot its `__exit__`."""
    transaction.atomic().__enter__()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"left": "open"}


def leave(job: JobContext) -> None:
    """Raise what stops a program, not a job: `sys.exit(code)` or a stray KeyboardInterrupt
    (`how`: "exit" or "interrupt")."""
    if job.payload["how"] == "exit":
        sys.exit(job.payload.get("code"))
    raise KeyboardInterrupt


@dataclass
class Size:
    width: int
    height: int = 100


@dataclass
class ResizeArgs:
    """A payload declared as a dataclass, nesting another."""

    url: str
    size: Size
    format: Literal["png", "jpeg"] = "png"


class MailArgs(TypedDict):
    """A payload declared as a TypedDict (typing_extensions' on Python 3.11)."""

    to: str
    cc: NotRequired[list[str]]


class ReportArgs(BaseModel):
    """A payload declared as a pydantic model, with a rule JSON schema cannot state."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=50)
    rows: int = Field(ge=1, le=1000)

    @field_validator("name")
    @classmethod
    def _no_spaces(cls, name: str) -> str:
        if " " in name:
            raise ValueError("no spaces in a report name")
        return name


def typed(job: JobContext[Any]) -> dict[str, Any]:
    """Say which class the payload arrived as, and what it holds."""
    payload = job.payload
    return {
        "class": type(payload).__name__,
        "fields": TypeAdapter(type(payload)).dump_python(payload, mode="json"),
    }


HANDLERS: dict[str, tuple[Any, dict[str, Any]]] = {
    "record_run": (record_run, {}),
    # The same under another type name, for limits on a type.
    "record_rated": (record_run, {}),
    "count_run": (count_run, {}),
    "backend_pid": (backend_pid, {}),
    "logged_queries": (logged_queries, {}),
    "wait_for_cancel": (wait_for_cancel, {}),
    "sleep": (sleep, {}),
    "short_timeout": (sleep, {"timeout": 0.5}),
    "fail_while_file_exists": (fail_while_file_exists, {}),
    "echo": (echo, {}),
    "prints": (prints, {}),
    "prints_inline": (prints, {"inline": True}),
    "gc_reach": (gc_reach, {}),
    "unstorable": (unstorable, {}),
    "start_thread": (start_thread, {}),
    "open_transaction": (open_transaction, {}),
    "open_transaction_inline": (open_transaction, {"inline": True}),
    "leave": (leave, {}),
    "leave_inline": (leave, {"inline": True}),
    "typed_dataclass": (typed, {"schema": ResizeArgs}),
    "typed_dict": (typed, {"schema": MailArgs}),
    "typed_model": (typed, {"schema": ReportArgs}),
}


def register_all() -> None:
    for name, (func, options) in HANDLERS.items():
        if name not in registry:
            registry.register(name, **options)(func)


def unregister_all() -> None:
    for name in HANDLERS:
        registry.unregister(name)


register_all()
