"""Make the README's screenshots: `make screenshots` (python -m tests.console.screenshots).

Seeds a fresh database of its own (`<DATABASE_URL's name>_screenshots`, dropped at the
end: the development database is never touched), runs a worker until some seeded jobs
have failed into the dead-letter queue, serves the console with daphne on a free port,
and captures Dashboard, Ledger, DLQ Overview and DLQ Detail at 1280 px into
static/screenshots/, with Debian's Chromium.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "static" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
USERNAME, PASSWORD = "demo-operator", "demo-operator-password"
WAIT_FOR_DLQ_SECONDS = 90
DLQ_WANTED = 4


def say(message: str) -> None:
    print(f"screenshots: {message}", flush=True)


def fresh_database(database_url: str) -> str:
    """Create an empty database next to the configured one; return its URL."""
    parts = urlsplit(database_url)
    name = (parts.path.lstrip("/") or "scheduler") + "_screenshots"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return urlunsplit(parts._replace(path=f"/{name}"))


def drop_database(database_url: str) -> None:
    parts = urlsplit(database_url)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(parts.path.lstrip("/"))
            )
        )


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


@contextmanager
def running(command: list[str], env: dict[str, str], **kwargs: object) -> Iterator[None]:
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs
    )
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def query_one(database_url: str, statement: str) -> tuple[object, ...] | None:
    with psycopg.connect(database_url) as conn:
        return conn.execute(statement).fetchone()  # type: ignore[arg-type]


def wait_for_dead_letters(database_url: str) -> str:
    """Wait until enough seeded jobs used all their attempts, one of them several (so the
    retry timeline has backoff to show); return the DLQ job with the most attempts."""
    deadline = time.monotonic() + WAIT_FOR_DLQ_SECONDS
    while time.monotonic() < deadline:
        row = query_one(
            database_url,
            "SELECT count(*), coalesce(max(attempt_count), 0) FROM jobs WHERE in_dlq",
        )
        if row and int(str(row[0])) >= DLQ_WANTED and int(str(row[1])) >= 3:
            break
        time.sleep(1)
    best = query_one(
        database_url,
        """SELECT j.id FROM jobs j JOIN job_attempts a ON a.job_id = j.id
           WHERE j.in_dlq GROUP BY j.id ORDER BY count(*) DESC, max(j.updated_at) DESC LIMIT 1""",
    )
    if best is None:
        raise SystemExit("no job reached the dead-letter queue: is seed_db seeding failures?")
    return str(best[0])


def wait_until_serving(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/accounts/login/", timeout=2):  # noqa: S310
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the web server did not answer")


def capture(base_url: str, dlq_job: str) -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    OUTPUT.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(
            base_url=base_url, viewport={"width": 1280, "height": 860}, color_scheme="light"
        )
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill('input[name="username"]', USERNAME)
        page.fill('input[name="password"]', PASSWORD)
        page.click('button[type="submit"]')
        page.wait_for_url(base_url + "/")
        for name, path in [
            ("dashboard", "/"),
            ("ledger", "/jobs"),
            ("dlq", "/dlq"),
            ("dlq-detail", f"/dlq/{dlq_job}"),
        ]:
            page.goto(path)
            expect(page.locator("#live")).to_have_attribute("data-state", "open")
            page.wait_for_timeout(600)  # let the first stats.updated and fragments settle
            target = OUTPUT / f"{name}.png"
            page.screenshot(path=str(target), full_page=name != "ledger")
            shots.append(target)
        browser.close()
    return shots


def free_listener() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener


def main() -> None:
    base_env = dict(os.environ)
    if "DATABASE_URL" not in base_env:
        raise SystemExit("DATABASE_URL is not set: run through `make screenshots`.")
    database_url = fresh_database(base_env["DATABASE_URL"])
    env = {
        **base_env,
        "DATABASE_URL": database_url,
        "SCHEDULER_EVENTS_CHANNEL": "scheduler:events:screenshots",
        "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
    }
    try:
        say("migrating and seeding a fresh database")
        manage(env, "migrate", "--noinput")
        manage(env, "seed_db")
        manage(
            env,
            "shell",
            "-c",
            "from django.contrib.auth.models import User; from jobs.roles import Role, "
            f"assign_role; u = User.objects.create_user({USERNAME!r}, password={PASSWORD!r}); "
            "assign_role(u, Role.OPERATOR)",
        )
        listener = free_listener()
        port = listener.getsockname()[1]
        daphne = [
            sys.executable,
            "-m",
            "daphne",
            "--fd",
            str(listener.fileno()),
            "scheduler_project.asgi:application",
        ]
        worker = [sys.executable, "manage.py", "runworker"]
        with running(worker, env), running(daphne, env, pass_fds=[listener.fileno()]):
            say("running a worker until seeded failures reach the dead-letter queue")
            dlq_job = wait_for_dead_letters(database_url)
            base_url = f"http://127.0.0.1:{port}"
            wait_until_serving(base_url)
            for shot in capture(base_url, dlq_job):
                say(f"wrote {shot}")
        listener.close()
    finally:
        drop_database(database_url)


if __name__ == "__main__":
    main()
