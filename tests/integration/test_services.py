"""scheduler_project/services.py: what `make run` and `make test` stand on. Embedded
PostgreSQL and Redis are started for real in a temporary data directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import psycopg
import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from jobs.models import ApiToken
from jobs.roles import is_operator
from scheduler_project.services import (
    LOCAL_DATABASE_URL,
    LOCAL_REDIS_URL,
    EmbeddedPostgres,
    EmbeddedRedis,
    pid_alive,
    port_open,
    postgres_connection_kwargs,
)

ROOT = Path(__file__).resolve().parents[2]
SERVICES = [sys.executable, "-m", "scheduler_project.services"]

PROBE = """
import json, os, sys
import psycopg, redis
from scheduler_project.services import postgres_connection_kwargs

url = os.environ["DATABASE_URL"]
with psycopg.connect(**postgres_connection_kwargs(url), autocommit=True) as conn:
    one = conn.execute("SELECT 1").fetchone()[0]
    listen = conn.execute("SHOW listen_addresses").fetchone()[0]
    conn.execute("CREATE TABLE kept (note text)")
    conn.execute("INSERT INTO kept VALUES ('still here')")
client = redis.Redis.from_url(os.environ["REDIS_URL"])
print(json.dumps({
    "database_url": url, "redis_url": os.environ["REDIS_URL"], "select": one,
    "listen_addresses": listen, "ping": client.ping(),
    "redis_port": client.config_get("port")["port"],
}))
sys.exit(5)
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not tmp_path: pytest makes its parents owner-only, and a root-run suite's PostgreSQL
    # runs as another user, who must be able to reach the directory.
    directory = Path(tempfile.mkdtemp(prefix="sched-services-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def services_env(data_dir: Path, **overrides: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SCHEDULER_DATA_DIR": str(data_dir),
            "DATABASE_URL": "",
            "REDIS_URL": "",
            # The suite itself may run with it (a check of the embedded path).
            "SCHEDULER_FORCE_EMBEDDED": "",
        }
    )
    env.update(overrides)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_exec_runs_the_command_on_embedded_servers_then_stops_them(data_dir):
    result = subprocess.run(
        [*SERVICES, "exec", "--prefer-local", "--", sys.executable, "-c", PROBE],
        env=services_env(data_dir, SCHEDULER_FORCE_EMBEDDED="1"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    # The command's exit code comes back unchanged: pytest's 5 (no tests ran) fails make.
    assert result.returncode == 5, result.stderr
    seen = json.loads(result.stdout)
    assert seen["select"] == 1
    assert seen["listen_addresses"] == ""
    assert seen["ping"] is True
    assert seen["redis_port"] == "0"
    assert postgres_connection_kwargs(seen["database_url"])["host"] == str(data_dir / "postgres")
    assert seen["redis_url"] == f"unix://{data_dir / 'redis' / 'redis.sock'}?db=0"

    postgres = EmbeddedPostgres(data_dir / "postgres")
    redis_server = EmbeddedRedis(data_dir / "redis")
    assert not postgres.running()
    assert not redis_server.running()
    assert not (data_dir / "postgres" / ".s.PGSQL.5432").exists()
    assert not (data_dir / "redis" / "redis.sock").exists()

    # A second start reuses the data; a command borrowing the running servers leaves them up.
    postgres.start()
    try:
        with psycopg.connect(**postgres_connection_kwargs(postgres.url)) as conn:
            assert conn.execute("SELECT note FROM kept").fetchall() == [("still here",)]
        borrower = subprocess.run(
            [*SERVICES, "exec", "--", sys.executable, "-c", "print('borrowed')"],
            env=services_env(data_dir, REDIS_URL="redis://127.0.0.1:1/0"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert borrower.returncode == 0, borrower.stderr
        assert postgres.running()
    finally:
        postgres.stop()
    assert not postgres.running()


def test_exec_uses_the_urls_it_is_given_and_starts_nothing(data_dir):
    given = {
        "DATABASE_URL": "postgresql://someone@db.example:6543/jobs",
        "REDIS_URL": "redis://cache.example:6380/3",
    }
    result = subprocess.run(
        [
            *SERVICES,
            "exec",
            "--prefer-local",
            "--",
            sys.executable,
            "-c",
            "import os; print(os.environ['DATABASE_URL'], os.environ['REDIS_URL'])",
        ],
        env=services_env(data_dir, **given),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [given["DATABASE_URL"], given["REDIS_URL"]]
    assert list(data_dir.iterdir()) == []


@pytest.mark.skipif(
    not (port_open("127.0.0.1", 5432) and port_open("127.0.0.1", 6379)),
    reason="needs this machine's PostgreSQL and Redis on 127.0.0.1",
)
def test_exec_prefer_local_picks_the_machines_servers_when_they_answer(data_dir):
    result = subprocess.run(
        [
            *SERVICES,
            "exec",
            "--prefer-local",
            "--",
            sys.executable,
            "-c",
            "import os; print(os.environ['DATABASE_URL'], os.environ['REDIS_URL'])",
        ],
        env=services_env(data_dir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [LOCAL_DATABASE_URL, LOCAL_REDIS_URL]
    assert list(data_dir.iterdir()) == []


def test_exec_forwards_sigterm_to_the_command_and_returns_its_status(data_dir):
    script = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('got SIGTERM', flush=True)\n"
        "    sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    with subprocess.Popen(
        [*SERVICES, "exec", "--", sys.executable, "-c", script],
        env=services_env(
            data_dir, DATABASE_URL="postgres://x@db.example/x", REDIS_URL="redis://r.example/0"
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 7
        assert process.stdout.read().strip() == "got SIGTERM"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_make_run_serves_the_api_with_the_printed_token_and_ctrl_c_stops_everything(
    subprocess_env, data_dir
):
    port = free_port()
    env = {
        **subprocess_env,
        "SCHEDULER_DATA_DIR": str(data_dir),
        "WEB_PORT": str(port),
        "SCHEDULER_SHUTDOWN_GRACE": "3",
    }
    output = data_dir / "make-run.out"
    with output.open("w") as stdout:
        process = subprocess.Popen(
            [*SERVICES, "run"], env=env, cwd=ROOT, stdout=stdout, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 90
        while "runworker (pid" not in output.read_text() and process.poll() is None:
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(0.2)
        banner = output.read_text()
        token = re.search(r"API token\s+(\S+)", banner)
        login = re.search(r"Login\s+admin / (\S+)", banner)
        worker_pid = re.search(r"runworker \(pid (\d+)\)", banner)
        assert token and login and worker_pid, banner
        assert f"http://127.0.0.1:{port}/api-docs" in banner

        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/jobs/stats",
            headers={"Authorization": f"Bearer {token[1]}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            stats = json.load(response)
        assert stats["total"] >= 120  # the demo jobs, seeded into the empty database
        stored = json.loads((data_dir / "dev-admin.json").read_text())
        assert (stored["password"], stored["token"]) == (login[1], token[1])

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            # SIGTERM first: SIGKILL would leave the web server and the worker running.
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert not port_open("127.0.0.1", port)
    deadline = time.monotonic() + 5
    while pid_alive(int(worker_pid[1])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(int(worker_pid[1]))
    assert redis.Redis.from_url(env["REDIS_URL"]).ping()


def ensure_dev_admin(path: Path) -> dict[str, str]:
    output = StringIO()
    call_command("ensure_dev_admin", "--json", "--credentials-file", str(path), stdout=output)
    return dict(json.loads(output.getvalue()))


@pytest.mark.django_db
def test_ensure_dev_admin_shows_the_same_working_credentials_on_every_run(tmp_path, settings):
    settings.DEBUG = True  # pytest-django turns it off; `make run` runs with the default, on
    path = tmp_path / "dev-admin.json"
    first = ensure_dev_admin(path)
    assert ensure_dev_admin(path) == first
    admin = User.objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff and is_operator(admin)
    assert admin.check_password(first["password"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {first['token']}")
    assert client.get("/api/v1/jobs/stats").status_code == 200

    # A token revoked in the database is replaced; the password stays.
    ApiToken.objects.filter(user=admin).delete()
    again = ensure_dev_admin(path)
    assert again["password"] == first["password"]
    assert again["token"] != first["token"]
    assert ApiToken.objects.filter(user=admin).count() == 1


@pytest.mark.django_db
def test_ensure_dev_admin_refuses_when_debug_is_off(tmp_path, settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG is off"):
        ensure_dev_admin(tmp_path / "dev-admin.json")
    assert not User.objects.filter(username="admin").exists()
