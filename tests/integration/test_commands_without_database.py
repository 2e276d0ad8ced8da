"""A one-shot `manage.py` command run where its database cannot be reached, the jobs app's
or Django's own: one line naming DATABASE_URL and the server's reason, at once. Each waited
the pool's timeout (10 s), then printed an 80-line traceback; Django's own, once they failed
at once, still printed the traceback. `runworker` waits for the database instead."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
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
    # Django's own, which connect wherever their first query is.
    ["migrate"],
    ["createsuperuser", "--noinput", "--username", "zed", "--email", "zed@example.com"],
    ["shell", "--no-imports", "-c", "from jobs.models import Job; Job.objects.count()"],
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


def manage(command: list[str], tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(settings.BASE_DIR) / "manage.py"),
        *(argument.format(tmp=tmp_path) for argument in command),
    ]


# A command that waited for the pool rather than failing at once would outlast `run_command`'s
# timeout by far, however busy the machine, where a bound on the seconds it took would not.
POOL_TIMEOUT_SECONDS = 600


def environment(database_url: str) -> dict[str, str]:
    return {
        **subprocess_environment(),
        "DATABASE_URL": database_url,
        "DATABASE_POOL_TIMEOUT": str(POOL_TIMEOUT_SECONDS),
        "DEBUG": "true",
    }


def run_command(
    command: list[str], database_url: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        manage(command, tmp_path),
        cwd=settings.BASE_DIR,
        env=environment(database_url),
        capture_output=True,
        text=True,
        timeout=POOL_TIMEOUT_SECONDS / 10,
    )


def assert_refused_at_once(
    done: subprocess.CompletedProcess[str], database_url: str, reason: str
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
    assert done.stdout == ""


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_a_command_on_a_database_that_does_not_exist_says_so_at_once(command, tmp_path):
    url = with_password(
        elsewhere(subprocess_environment()["DATABASE_URL"], database="never_created")
    )
    done = run_command(command, url, tmp_path)
    assert_refused_at_once(done, url, 'database "never_created" does not exist')


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_a_command_whose_database_server_refuses_connections_says_so_at_once(
    command, closed_port, tmp_path
):
    url = f"postgres://postgres:{PASSWORD}@127.0.0.1:{closed_port}/scheduler"
    done = run_command(command, url, tmp_path)
    assert_refused_at_once(done, url, "Connection refused")


def test_traceback_shows_the_whole_chain_of_a_connection_refused(tmp_path):
    url = elsewhere(subprocess_environment()["DATABASE_URL"], database="never_created")
    done = run_command(["migrate", "--traceback"], url, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):"), done.stderr
    assert "The above exception was the direct cause of the following exception" in done.stderr
    assert done.stderr.rstrip().endswith('database "never_created" does not exist')
    assert "CommandError" not in done.stderr


def test_a_database_lost_after_the_command_connected_keeps_its_traceback(tmp_path):
    # Only a first connection refused is the database's address or state; one lost mid-way
    # (here: its server ended the session) is told where it happened.
    lost = (
        "from django.db import connection; "
        "connection.cursor().execute('SELECT pg_terminate_backend(pg_backend_pid())')"
    )
    url = subprocess_environment()["DATABASE_URL"]
    done = run_command(["shell", "-c", lost], url, tmp_path)
    assert done.returncode == 1
    assert "Traceback (most recent call last):" in done.stderr
    assert done.stderr.rstrip().endswith("terminating connection due to administrator command")
    assert "DATABASE_URL=" not in done.stderr


def test_runworker_on_a_database_that_does_not_exist_waits_for_it(tmp_path):
    url = elsewhere(subprocess_environment()["DATABASE_URL"], database="never_created")
    worker = subprocess.Popen(
        manage(["runworker", "--concurrency", "1"], tmp_path),
        cwd=settings.BASE_DIR,
        env=environment(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        said = []
        for line in worker.stdout:
            said.append(line)
            if "database unavailable" in line:
                break
        assert "never_created" in said[-1] and "retrying" in said[-1], said
        assert worker.poll() is None, said
        worker.send_signal(signal.SIGTERM)
        rest, _ = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, rest
    assert "stopped (clean) before it registered" in rest
    assert "CommandError" not in rest and "Traceback" not in rest
