"""`make faults`: the whole system, as real processes, through one fault after another.

A web server (daphne), two workers (one of them reaching PostgreSQL through a TCP proxy
this suite controls) and 20 API clients run on an embedded PostgreSQL and Redis of their
own under `.data/faults/`, so stopping those servers disturbs nobody else. The faults, in
order: a worker killed with SIGKILL mid-batch, a PostgreSQL restart, PostgreSQL stopped
for 15 s and for 45 s, Redis stopped for 20 s, and one worker cut off from PostgreSQL.
All settings are the defaults. Then `checks.check` judges what happened, fault by fault,
and one table is printed; the exit status is 1 if any invariant broke.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from scheduler_project.devservices.paths import BASE_DIR
from scheduler_project.devservices.postgres_server import (
    EmbeddedPostgres,
    create_database,
    postgres_connection_kwargs,
)
from scheduler_project.devservices.processes import free_port
from scheduler_project.devservices.redis_server import EmbeddedRedis
from scheduler_project.devservices.supervisor import terminate_with_parent

from .checks import Window, check, render
from .load import Load
from .proxy import Proxy

T = TypeVar("T")

DATA = BASE_DIR / ".data" / "faults"
DATABASE = "faults"
CLIENTS = 20
# After each fault, time for the system to settle before the next one.
SETTLE_SECONDS = 10.0
# Jobs of 2 s submitted just before a worker is killed or cut off, so that it surely has
# handlers running (and, for the cut-off worker, outcomes waiting) at that moment.
LONG_JOB_SECONDS = 2.0


def say(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", flush=True)


class GaveUp(Exception):
    pass


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> float:
    """Poll until `predicate()` holds; the seconds it took."""
    began = time.monotonic()
    while not predicate():
        if time.monotonic() - began > timeout:
            raise GaveUp(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - began


class Process:
    """A child in its own session (a Ctrl-C reaches only the suite), logging to a file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log_path = DATA / "logs" / f"{name}.log"
        self._log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            command,
            env=env,
            cwd=BASE_DIR,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=terminate_with_parent,
        )
        self.pid = self.popen.pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(45)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")


class Suite:
    def __init__(self) -> None:
        self.postgres = EmbeddedPostgres(DATA / "postgres")
        self.redis = EmbeddedRedis(DATA / "redis")
        self.effects = DATA / "effects"
        self.proxy: Proxy
        self.env: dict[str, str] = {}
        self.processes: list[Process] = []
        self.workers: dict[str, Process] = {}
        self.worker_ids: dict[str, str] = {}
        self.windows: list[Window] = []
        # Workers whose lost attempts may have run their handler to the end (documented
        # at-least-once cases): killed ones, and the one cut off and fenced.
        self.killed: set[str] = set()
        self.fenced: set[str] = set()

    # --- set-up -------------------------------------------------------------------------------

    def prepare(self) -> None:
        shutil.rmtree(DATA / "logs", ignore_errors=True)
        (DATA / "logs").mkdir(parents=True)
        self.effects.unlink(missing_ok=True)
        self.postgres.start()
        self.redis.start()
        maintenance = self.postgres.url_for("postgres")
        import psycopg

        with psycopg.connect(**postgres_connection_kwargs(maintenance), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        create_database(maintenance, DATABASE)
        self.env = {
            **os.environ,
            "DATABASE_URL": self.postgres.url_for(DATABASE),
            "REDIS_URL": self.redis.url,
            "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
            "SCHEDULER_EXTRA_APPS": "tests.handlers_app",
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        os.environ.update(self.env)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        self.proxy = Proxy(str(self.postgres.socket_dir / ".s.PGSQL.5432"))

    def api_token(self) -> str:
        from django.contrib.auth import get_user_model

        from jobs.api.auth import issue_token
        from jobs.roles import Role, assign_role

        user = get_user_model().objects.create_user("faults", password=secrets.token_urlsafe())
        assign_role(user, Role.OPERATOR)
        return issue_token(user)

    def start_web(self) -> int:
        port = free_port()
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        self.spawn("web", [*command, "scheduler_project.asgi:application"])
        wait_until(lambda: _port_open(port), 60, "the web server")
        return port

    def start_worker(self, name: str, *, through_proxy: bool = False) -> Process:
        env = dict(self.env)
        if through_proxy:
            env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:{self.proxy.port}/{DATABASE}"
        worker = self.spawn(name, [sys.executable, "manage.py", "runworker"], env)
        wait_until(lambda: self.registered_id(worker), 60, f"worker {name} to register")
        self.workers[name] = worker
        self.worker_ids[name] = str(self.registered_id(worker))
        return worker

    def spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Process:
        process = Process(name, command, env or self.env)
        self.processes.append(process)
        return process

    # --- what the database says ---------------------------------------------------------------

    def registered_id(self, worker: Process) -> str | None:
        from jobs.models import Worker

        rows = Worker.objects.filter(pid=worker.pid).order_by("-started_at")
        row = _query(rows.first)
        return str(row.id) if row else None

    def worker_status(self, name: str) -> str:
        from jobs.models import Worker

        return _query(lambda: Worker.objects.get(id=self.worker_ids[name]).status)

    def running_on(self, name: str) -> int:
        from jobs.models import Job

        running = Job.objects.filter(status="processing", worker_id=self.worker_ids[name])
        return _query(running.count)

    def submit_long_jobs(self, count: int) -> None:
        from jobs import state

        payload = {"path": str(self.effects), "seconds": LONG_JOB_SECONDS}
        specs = [state.JobSpec("count_run", payload) for _ in range(count)]
        _query(lambda: state.enqueue_many(specs))

    # --- the faults ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def fault(self, name: str, *, database_down: bool = False) -> Iterator[Window]:
        say(name)
        window = Window(name, database_down, time.time())
        if self.windows:
            self.windows[-1].end = window.start
        self.windows.append(window)
        try:
            yield window
        except (GaveUp, DatabaseUnreachable) as problem:
            say(str(problem))
            window.problems.append(str(problem))
        time.sleep(SETTLE_SECONDS)

    def kill_a_worker(self) -> None:
        with self.fault("worker killed (kill -9) mid-batch") as window:
            self.submit_long_jobs(8)
            wait_until(lambda: self.running_on("worker-a") > 0, 30, "the victim to run jobs")
            self.workers["worker-a"].kill()
            self.killed.add(self.worker_ids["worker-a"])
            killed_at = time.monotonic()
            # A supervisor would start a new one; the survivor rescues the victim's jobs.
            self.start_worker("worker-a2")
            wait_until(lambda: self.running_on("worker-a") == 0, 120, "the victim's jobs back")
            window.note = f"jobs back after {time.monotonic() - killed_at:.0f} s"

    def restart_postgres(self) -> None:
        with self.fault("PostgreSQL restart", database_down=True):
            self.postgres.stop()
            self.postgres.start()

    def stop_postgres(self, seconds: float) -> None:
        with self.fault(f"PostgreSQL stopped {seconds:.0f} s", database_down=True):
            self.postgres.stop()
            time.sleep(seconds)
            self.postgres.start()

    def stop_redis(self, seconds: float) -> None:
        with self.fault(f"Redis stopped {seconds:.0f} s"):
            self.redis.stop()
            time.sleep(seconds)
            self.redis.start()

    def cut_off_a_worker(self) -> None:
        with self.fault("one worker cut off from PostgreSQL") as window:
            self.submit_long_jobs(8)
            wait_until(lambda: self.running_on("worker-b") > 0, 30, "the worker to run jobs")
            self.proxy.cut()
            self.fenced.add(self.worker_ids["worker-b"])
            cut_at = time.monotonic()
            wait_until(lambda: self.running_on("worker-b") == 0, 120, "its jobs to be rescued")
            rescued_after = time.monotonic() - cut_at
            self.proxy.restore()
            wait_until(lambda: self.worker_status("worker-b") == "running", 60, "its next beat")
            # Its handlers finished while it was cut off: their outcomes must be refused.
            log = self.workers["worker-b"].log
            wait_until(lambda: "refused: its claim was lost" in log(), 30, "a late outcome")
            refused = log().count("refused: its claim was lost")
            window.note = f"rescued after {rescued_after:.0f} s; {refused} late outcomes refused"

    # --- the run ------------------------------------------------------------------------------

    def run(self) -> int:
        began = time.monotonic()
        self.prepare()
        token = self.api_token()
        port = self.start_web()
        self.start_worker("worker-a")
        self.start_worker("worker-b", through_proxy=True)
        load = Load(port, token, self.effects, clients=CLIENTS)
        load.start()
        with self.fault("none (warm-up)"):
            pass
        self.kill_a_worker()
        self.restart_postgres()
        self.stop_postgres(15)
        self.stop_postgres(45)
        self.stop_redis(20)
        self.cut_off_a_worker()
        load.stop()
        say("load stopped; waiting for every job to finish")
        drained = _wait_drained(timeout=180)
        report = _query(
            lambda: check(
                self.windows, load.answers, self.effects, killed=self.killed, fenced=self.fenced
            )
        )
        minutes = (time.monotonic() - began) / 60
        print(render(report, drained=drained, minutes=minutes), flush=True)
        return 0 if report.holds and drained else 1

    def close(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        with contextlib.suppress(AttributeError):
            self.proxy.close()
        self.redis.stop()
        self.postgres.stop()


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class DatabaseUnreachable(Exception):
    pass


def _query(action: Callable[[], T]) -> T:
    """`action()` on a live connection. The suite's own connection dies with each PostgreSQL
    restart, and the database may refuse new clients for a while (a fault of its own, which
    the table shows through the API's answers): retry for up to a minute."""
    from django.db import OperationalError, close_old_connections

    deadline = time.monotonic() + 60
    while True:
        close_old_connections()
        try:
            return action()
        except OperationalError as error:
            if time.monotonic() > deadline:
                raise DatabaseUnreachable(
                    f"the suite could not query PostgreSQL: {error}"
                ) from error
            time.sleep(1)


def _wait_drained(timeout: float) -> bool:
    from jobs.models import Job

    waiting = Job.objects.filter(status__in=["pending", "processing", "failed"], in_dlq=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _query(waiting.exists):
            return True
        time.sleep(0.5)
    return False


def main() -> int:
    suite = Suite()
    try:
        return suite.run()
    finally:
        suite.close()
