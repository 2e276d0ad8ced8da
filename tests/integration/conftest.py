"""Fixtures for the worker tests: real `manage.py runworker` subprocesses on the test
database, the test-only job types, and a table where handlers record each execution."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from jobs.models import Job, Worker
from tests.console.test_webhooks import Receiver
from tests.handlers_app.handlers import RUNS_TABLE, register_all, unregister_all

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")

# Short enough that a dead worker is noticed within a couple of seconds.
FAST_WORKER_ENV = {
    "SCHEDULER_EXTRA_APPS": "tests.handlers_app",
    "SCHEDULER_HEARTBEAT_INTERVAL": "0.3",
    "SCHEDULER_WORKER_TIMEOUT": "2",
    "SCHEDULER_SHUTDOWN_GRACE": "10",
    "LOG_LEVEL": "INFO",
}


def wait_for(
    predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Poll until `predicate()` is truthy and return its value; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def forget_statistics(*tables: str) -> None:
    """What tables that were never analyzed look like to the planner. A flush empties a
    table but keeps its statistics, and ANALYZE of an empty table keeps them too."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [table])
            cursor.execute(
                "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = %s::regclass",
                [table],
            )


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan as EXPLAIN (FORMAT JSON) gives it, the root first."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def job_status(job_id: Any) -> str:
    return Job.objects.values_list("status", flat=True).get(id=job_id)


class WorkerProcess:
    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, MANAGE, "runworker", *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.popen.pid

    def row(self) -> Worker | None:
        return Worker.objects.filter(pid=self.pid).order_by("-started_at").first()

    def wait_registered(self, timeout: float = 60.0) -> Worker:
        # As long as the tests wait for a first job to start: a start-up (Django, the schema
        # check, the registration) once took over 20 s with several suites on the 2 cores.
        try:
            return wait_for(self.row, timeout, what=f"worker {self.pid} to register")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its log:\n{self.logs()}") from None

    def send(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker did not exit in {timeout}s:\n{self.logs()}") from None

    def logs(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Kill the worker, then wait for its lanes: each gets SIGTERM when its parent dies
        and stops on its own, writing its row as it goes. Left running, one held a lock on
        `workers` while the test database was flushed, which PostgreSQL ended as a deadlock."""
        if self.popen.poll() is None:
            lanes = self._children()
            self.popen.send_signal(signal.SIGCONT)
            self.popen.kill()
            self.popen.wait(10)
            deadline = time.monotonic() + 15
            while lanes and time.monotonic() < deadline:
                lanes = [pid for pid in lanes if _alive(pid)]
                time.sleep(0.05)
            for pid in lanes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._log.close()

    def _children(self) -> list[int]:
        """The worker's child processes (its lanes), from every thread's list in /proc."""
        children: list[int] = []
        for listing in Path(f"/proc/{self.pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                children += [int(pid) for pid in listing.read_text().split()]
        return children


def _alive(pid: int) -> bool:
    """Still running: a process that exited is gone, or a zombie until its new parent reaps it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.fixture
def test_handlers() -> Iterator[None]:
    register_all()
    yield
    unregister_all()


@pytest.fixture
def worker_env(subprocess_env: dict[str, str], test_handlers: None) -> dict[str, str]:
    return {**subprocess_env, **FAST_WORKER_ENV}


@pytest.fixture
def start_worker(
    worker_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """`start_worker("--concurrency", "2", env={...})` runs a worker until the test ends."""
    started: list[WorkerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        log_path = tmp_path / f"worker-{len(started)}.log"
        process = WorkerProcess(list(args), {**worker_env, **(env or {})}, log_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def runs_table(transactional_db: None) -> Iterator[str]:
    """A table where `record_run` writes one row per execution."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {RUNS_TABLE} (job_id uuid NOT NULL, "
            "attempt_id uuid NOT NULL, pid integer NOT NULL, started_at timestamptz NOT NULL, "
            "finished_at timestamptz)"
        )
        cursor.execute(f"TRUNCATE {RUNS_TABLE}")
    yield RUNS_TABLE
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {RUNS_TABLE}")


def recorded_runs() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT job_id, attempt_id, pid, started_at, finished_at FROM {RUNS_TABLE} "  # noqa: S608
            "ORDER BY started_at"
        )
        return cursor.fetchall()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1, which deliveries may reach for the test."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    server = Receiver()
    yield server
    server.close()
