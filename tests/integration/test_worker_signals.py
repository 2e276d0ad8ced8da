"""How a worker stops: on SIGHUP as on SIGTERM, at once while it waits for the database at
start, and without waiting out the grace when nothing runs. What it logs meanwhile."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from jobs import state
from jobs.models import Worker

from .conftest import MANAGE, WorkerProcess, job_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The longest wait between two tries for the database (SCHEDULER_HEARTBEAT_INTERVAL), so
# that the worker is surely asleep for seconds when it is told to stop.
LONG_RETRY_ENV = {"SCHEDULER_HEARTBEAT_INTERVAL": "60", "SCHEDULER_WORKER_TIMEOUT": "180"}
# A retry the worker sleeps 4 s before (its waits double from 0.25 s: it says so 3.75 s in).
SLEEPING_RETRY = "in 4.0 s"
# How long a stop may take once asked for: less than the sleep it used to finish first.
PROMPT_EXIT_SECONDS = 3.0


def log_entries(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def messages(text: str) -> list[str]:
    return [entry["message"] for entry in log_entries(text)]


def seconds_to_stop(worker: WorkerProcess) -> float:
    """Send SIGTERM; how long the worker took to exit, which it must do with 0."""
    asked = time.monotonic()
    worker.send(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.logs()
    return time.monotonic() - asked


# --- SIGHUP --------------------------------------------------------------------------------


def test_a_worker_started_to_ignore_sighup_keeps_running(worker_env, tmp_path):
    # `nohup manage.py runworker &`: the one who started it asked for it to outlive the
    # session, so SIGHUP stays ignored.
    log_path = tmp_path / "nohup-worker.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["nohup", sys.executable, MANAGE, "runworker"],
            env=worker_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: Worker.objects.filter(pid=process.pid).exists(), timeout=20)
            process.send_signal(signal.SIGHUP)
            job = state.enqueue("noop", {})
            wait_for(lambda: job_status(job["id"]) == "completed", timeout=20)
            assert process.poll() is None, log_path.read_text()
        finally:
            process.kill()
            process.wait(10)


# --- database errors in the loop ---------------------------------------------------------


@pytest.fixture
def limited_role(subprocess_env: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """A role that is not a superuser, with every right on the tables, and the environment of
    a worker connecting as it: (the role's name quoted for SQL, environment). Dropped at
    the end."""
    db = connection.settings_dict
    # One per test database: test runs side by side share the server's roles.
    role = f"limited_worker_{db['NAME']}"
    quoted = connection.ops.quote_name(role)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {quoted}")
        cursor.execute(f"CREATE ROLE {quoted} LOGIN")
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {quoted}")
        cursor.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {quoted}")
        cursor.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {quoted}")
    host, port = quote(db["HOST"] or "127.0.0.1", safe=""), db["PORT"] or "5432"
    url = f"postgres://{quote(role, safe='')}@{host}:{port}/{db['NAME']}"
    yield quoted, {**subprocess_env, "DATABASE_URL": url}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role]
        )
        cursor.execute(f"DROP OWNED BY {quoted}")
        cursor.execute(f"DROP ROLE {quoted}")


@pytest.fixture
def worker_denied_heartbeats(
    limited_role: tuple[str, dict[str, str]], start_worker: Callable[..., WorkerProcess]
) -> Callable[[dict[str, str]], WorkerProcess]:
    """`worker_denied_heartbeats(env)`: a registered worker whose role may no longer update
    the `workers` table (its heartbeat, its stopping and stopped marks), as a grant lost in a
    deploy would do."""
    role, env = limited_role

    def start(extra_env: dict[str, str]) -> WorkerProcess:
        worker = start_worker(env={**env, **extra_env})
        worker.wait_registered()
        with connection.cursor() as cursor:
            cursor.execute(f"REVOKE UPDATE ON workers FROM {role}")
        return worker

    return start


def test_a_database_error_in_the_loop_is_logged_with_its_message(worker_denied_heartbeats):
    # Before, every turn logged "database unavailable (ProgrammingError)", which tells an
    # operator nothing to act on.
    worker = worker_denied_heartbeats({})

    wait_for(
        lambda: any(
            entry["level"] == "ERROR"
            and "ProgrammingError: permission denied for table workers" in entry["message"]
            and "retrying in" in entry["message"]
            for entry in log_entries(worker.logs())
        ),
        what="the loop's error with its message",
    )


def test_an_idle_worker_whose_turns_fail_stops_at_once_and_cleanly(worker_denied_heartbeats):
    # Before, it waited out the whole grace for a turn to succeed, then logged "stopped
    # (forced)" and exited 1, although nothing ran.
    worker = worker_denied_heartbeats({"SCHEDULER_SHUTDOWN_GRACE": "60"})
    wait_for(lambda: "(ProgrammingError" in worker.logs(), what="the turns to fail")

    took = seconds_to_stop(worker)

    # Marking the row stopped is still tried, in vain, for a few seconds (5): far less than
    # the grace.
    assert took < 20, worker.logs()
    said = messages(worker.logs())
    assert any("0 jobs left processing" in m for m in said), said
    assert any(m.endswith("stopped (clean)") for m in said), said


# --- waiting for the database at start ----------------------------------------------------


@pytest.fixture
def unapplied_latest_migration() -> Iterator[str]:
    """The name of the latest migration of `jobs`, unapplied as far as a new process sees:
    a rolling deploy's new worker, up before the release's `migrate` ran."""
    latest = MigrationRecorder.Migration.objects.filter(app="jobs").latest("id")
    latest.delete()
    yield latest.name
    MigrationRecorder.Migration.objects.create(app="jobs", name=latest.name)


def test_the_wait_for_a_migration_is_a_warning_that_says_what_to_run(
    start_worker, unapplied_latest_migration
):
    early = start_worker()
    wait_for(
        lambda: "lacks 1 migration of this code" in early.logs(),
        what="the worker to say what it waits for",
    )

    (entry, *_) = [e for e in log_entries(early.logs()) if "lacks 1 migration" in e["message"]]
    assert entry["level"] == "WARNING", entry
    assert "waiting for `manage.py migrate`" in entry["message"]
    # It is reached: calling it unavailable sent operators after the wrong problem.
    assert "unavailable" not in entry["message"]
    assert not Worker.objects.exists()


def test_sigterm_while_waiting_for_a_migration_stops_at_once_with_a_stopped_line(
    start_worker, unapplied_latest_migration
):
    early = start_worker(env=LONG_RETRY_ENV)
    wait_for(lambda: SLEEPING_RETRY in early.logs(), timeout=30, what="a long wait")

    # Before, the stop waited for the sleep to end (4 s here, up to the heartbeat interval).
    assert seconds_to_stop(early) < PROMPT_EXIT_SECONDS
    said = messages(early.logs())
    assert any(" stopped (clean)" in m for m in said), said
    assert not Worker.objects.exists()


@pytest.fixture
def refusing_address() -> Iterator[tuple[str, int]]:
    """An address whose connections are refused (bound, never listening), kept for the test."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()


def test_sigterm_while_the_database_is_unreachable_at_start_stops_at_once(
    start_worker, refusing_address
):
    host, port = refusing_address
    early = start_worker(
        env={**LONG_RETRY_ENV, "DATABASE_URL": f"postgres://postgres@{host}:{port}/nowhere"}
    )
    wait_for(lambda: SLEEPING_RETRY in early.logs(), timeout=30, what="a long wait")

    assert seconds_to_stop(early) < PROMPT_EXIT_SECONDS
    said = messages(early.logs())
    assert any("database unavailable (OperationalError: " in m for m in said), said
    assert any(" stopped (clean)" in m for m in said), said
