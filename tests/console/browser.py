"""What the console's browser tests run on: Debian's Chromium driven by Playwright, against
daphne serving the test database, so the SSE stream and HTMX run for real.

Not a test module: tests/console/conftest.py imports its fixtures, so each `test_browser*.py`
module gets a server and a browser of its own (module scope), a test that stops its server or
changes its settings starts its own (`console_server`), and each test gets a fresh browser
context (its own cookies).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from jobs.roles import Role

from ..conftest import make_user, subprocess_environment

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TIMEOUT_MS = 10_000
# For `expect` too (its own default is 5 s): this machine may be busy.
expect.set_options(timeout=TIMEOUT_MS)


def server_environment() -> dict[str, str]:
    """What `subprocess_env` gives a test, for a server shared by the whole module; its own
    cache prefix, so its rate-limit counters start empty."""
    return {
        **subprocess_environment(),
        "CACHE_KEY_PREFIX": f"test-browser-{uuid.uuid4().hex}",
    }


def wait_until_serving(url: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/accounts/login/", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("daphne did not answer in time")


class ConsoleServer:
    """daphne serving the test database on a socket bound here (port 0: the kernel picks a
    free one) and handed over with `--fd`, so no other process can take the port between
    choosing and listening. The socket outlives `stop()`: a browser's reconnection waits in
    its backlog until `start()`, as behind a restarting server."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.log = log_path.open("wb")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "--fd",
                str(self.listener.fileno()),
                "scheduler_project.asgi:application",
            ],
            cwd=ROOT,
            env=self.env,
            pass_fds=[self.listener.fileno()],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_until_serving(self.url, self.process)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def close(self) -> None:
        self.stop()
        self.listener.close()
        self.log.close()


@pytest.fixture(scope="module")
def live_server_url(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    with django_db_blocker.unblock():
        env = server_environment()
    ARTIFACTS.mkdir(exist_ok=True)
    server = ConsoleServer(env, ARTIFACTS / "daphne.log")
    try:
        server.start()
        yield server.url
    finally:
        server.close()


@pytest.fixture
def console_server(tmp_path: Path) -> Iterator[Callable[..., ConsoleServer]]:
    """`console_server(SSE_KEEPALIVE_SECONDS="1")`: a started server of the test's own, for
    a test that stops it or changes its settings."""
    started: list[ConsoleServer] = []

    def start(**extra_env: str) -> ConsoleServer:
        log_path = tmp_path / f"daphne-{len(started)}.log"
        server = ConsoleServer({**server_environment(), **extra_env}, log_path)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the tests make
    # between browser steps are plain synchronous ones, so Django's guard is lifted here.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def user(name: str, role: Role | None, **flags: Any) -> Any:
    created = make_user(name, role)
    if flags:
        get_user_model().objects.filter(pk=created.pk).update(**flags)
    return created


# Chromium reports a blocked script, style or connection as a console error; the page also
# gets a securitypolicyviolation event, relayed to the console here in case it says less.
REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
});
"""


@pytest.fixture
def csp_violations() -> list[str]:
    return []


@pytest.fixture
def open_page(browser: Browser, csp_violations: list[str]) -> Iterator[Callable[[str], Page]]:
    """`open_page(base_url)`: a page in a browser context of its own (its own cookies)."""
    contexts: list[BrowserContext] = []

    def open_(base_url: str) -> Page:
        context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        context.set_default_timeout(TIMEOUT_MS)
        context.add_init_script(REPORT_CSP_VIOLATIONS)
        context.on(
            "console",
            lambda message: (
                csp_violations.append(message.text)
                if "Content Security Policy" in message.text or "CSP violation" in message.text
                else None
            ),
        )
        return context.new_page()

    yield open_
    for context in contexts:
        context.close()
    # Every browser test doubles as a check that the console works under its CSP.
    assert csp_violations == []


@pytest.fixture
def page(open_page: Callable[[str], Page], live_server_url: str) -> Page:
    return open_page(live_server_url)


def log_in(page: Page, username: str, path: str = "/") -> None:
    page.goto(path)
    expect(page).to_have_url(f"/accounts/login/?next={quote(path)}")
    page.fill('input[name="username"]', username)
    page.fill('input[name="password"]', "pw-" + username)
    page.click('button[type="submit"]')
    page.wait_for_url(f"**{path}")


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    # The caret stays: Playwright hides it with a style attribute on the focused field, which
    # a live refresh of the page then copies (htmx settles `style`), against the CSP.
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True, caret="initial")
