"""A one-shot `manage.py` command run where its database cannot be reached: one line naming
DATABASE_URL and the server's reason, at once. Each waited the pool's timeout (10 s), then
printed an 80-line traceback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import subprocess_environment

PASSWORD = "not-to-be-shown"
COMMANDS = [
    ["create_api_token", "zed"],
    ["seed_db"],
    ["reset_db", "--force"],
    ["ensure_dev_admin", "--json", "--credentials-file", "{tmp}/dev-admin.json"],
]


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound and never listening: every connection refused
        yield closed.getsockname()[1]


def elsewhere(url: str, *, netloc: str | None = None, database: str | None = None) -> str:
    parts = urlsplit(url)
    return urlunsplit(
        parts._replace(netloc=netloc or parts.netloc, path=f"/{database or parts.path[1:]}")
    )


def with_password(url: str) -> str:
    """`url` with a password, the test database's own if it has one (a server trusting its
    clients ignores one it does not need)."""
    if connection.settings_dict["PASSWORD"]:
        return url
    user_info, _, host = urlsplit(url).netloc.rpartition("@")
    return elsewhere(url, netloc=f"{user_info}:{PASSWORD}@{host}")


def run_command(
    command: list[str], database_url: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**subprocess_environment(), "DATABASE_URL": database_url, "DEBUG": "true"}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            str(Path(settings.BASE_DIR) / "manage.py"),
            *(argument.format(tmp=tmp_path) for argument in command),
        ],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - started


def assert_refused_at_once(
    done: subprocess.CompletedProcess[str], seconds: float, database_url: str, reason: str
) -> None:
    parts = urlsplit(database_url)
    user, host = parts.netloc.partition(":")[0], parts.netloc.rpartition("@")[2]
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    said = done.stderr.strip()
    shown = re.escape(f"DATABASE_URL='{parts.scheme}://{user}:")
    shown += r"[^@']+" + re.escape(f"@{host}{parts.path}'")
    assert re.match(f"CommandError: {shown}: ", said), said
    assert parts.password and parts.password not in said
    assert reason in said
    # The pool's timeout is 10 s; a process's start is about one.
    assert seconds < 5, f"{seconds:.1f} s"
    assert done.stdout == ""


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_a_command_on_a_database_that_does_not_exist_says_so_at_once(command, tmp_path):
    url = with_password(
        elsewhere(subprocess_environment()["DATABASE_URL"], database="never_created")
    )
    done, seconds = run_command(command, url, tmp_path)
    assert_refused_at_once(done, seconds, url, 'database "never_created" does not exist')


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_a_command_whose_database_server_refuses_connections_says_so_at_once(
    command, closed_port, tmp_path
):
    url = f"postgres://postgres:{PASSWORD}@127.0.0.1:{closed_port}/scheduler"
    done, seconds = run_command(command, url, tmp_path)
    assert_refused_at_once(done, seconds, url, "Connection refused")
