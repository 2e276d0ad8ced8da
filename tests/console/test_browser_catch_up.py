"""What a console page missed while its stream was away, shown once it is back: the
dashboard's live log and the ledger's count and pager, read again as a fresh load reads them.

Runs on tests/console/browser.py's fixtures: a server and a browser of this module's own,
on the same xdist worker as test_browser.py.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from jobs import state
from jobs.models import UserPreference
from jobs.representation import short_id
from jobs.roles import Role

from .browser import ConsoleServer, log_in, user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("console_browser"),
]

# The log feed's cap (FEED_MAX in console.js) and the server's history (`selectors.log_feed`).
FEED_MAX = 60
FEED_HISTORY = 25


def feed_line(label: str, job: dict[str, Any], event: str) -> re.Pattern[str]:
    """A line of the live log as it reads: its time, the pill, the type, the id, the event."""
    return re.compile(
        rf"^\d\d:\d\d:\d\d{label}{job['type']}{re.escape(short_id(job['id']))}{re.escape(event)}$"
    )


def hold_the_stream(page: Page, path: str) -> Route:
    """Opens `path` with its event stream held back: what happens until it is let go is
    what a page rendered before its stream subscribed misses."""
    held: list[Route] = []
    page.route("**/api/jobs/stream", lambda route: held.append(route))
    page.goto(path)
    while not held:
        page.wait_for_timeout(50)
    return held[0]


def let_go(page: Page, stream: Route) -> None:
    stream.continue_()
    page.unroute("**/api/jobs/stream")


def read_lines(page: Page) -> list[str]:
    texts = page.locator("#log-feed .feed-line").evaluate_all(
        "(lines) => lines.map((line) => line.textContent)"
    )
    return [" ".join(text.split()) for text in texts]


def test_the_live_log_shows_what_happened_before_its_stream_connected(page: Page) -> None:
    user("lou", Role.VIEWER)
    steady = state.enqueue("noop", {})
    changed = state.enqueue("noop", {})
    log_in(page, "lou", "/settings")
    stream = hold_the_stream(page, "/")
    lines = page.locator("#log-feed .feed-line")
    expect(lines).to_have_text(
        [feed_line("Pending", changed, "job.created"), feed_line("Pending", steady, "job.created")]
    )

    # Their events are published before the page's stream subscribed: no one gets them.
    missed = state.enqueue("noop", {})
    state.cancel(uuid.UUID(changed["id"]))
    let_go(page, stream)

    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    # Newest first, and the lines the page had are there once.
    expect(lines).to_have_text(
        [
            feed_line("Cancelled", changed, "job.cancelled"),
            feed_line("Pending", missed, "job.created"),
            feed_line("Pending", changed, "job.created"),
            feed_line("Pending", steady, "job.created"),
        ]
    )


def test_the_live_log_catches_up_after_the_server_was_away(
    open_page: Callable[[str], Page], console_server: Callable[..., ConsoleServer]
) -> None:
    server = console_server()
    for _ in range(FEED_HISTORY + 5):
        state.enqueue("noop", {})
    user("mia", Role.VIEWER)
    page = open_page(server.url)
    log_in(page, "mia")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    lines = page.locator("#log-feed .feed-line")
    expect(lines).to_have_count(FEED_HISTORY)
    # Lines from events fill the log to its cap: the server's history holds some of them,
    # written to the microsecond where the events' times are to the millisecond.
    seen = [state.enqueue("noop", {}) for _ in range(FEED_MAX - FEED_HISTORY)]
    expect(lines.first).to_have_text(feed_line("Pending", seen[-1], "job.created"))
    expect(lines).to_have_count(FEED_MAX)

    server.stop()
    expect(page.locator("#live .live-text")).to_have_text("Reconnecting")
    missed = [state.enqueue("noop", {}) for _ in range(3)]  # their events reach no one
    state.cancel(uuid.UUID(seen[0]["id"]))
    server.start()

    expect(page.locator("#live .live-text")).to_have_text("Live")
    expect(lines.first).to_have_text(feed_line("Cancelled", seen[0], "job.cancelled"))
    expect(lines.nth(1)).to_have_text(feed_line("Pending", missed[2], "job.created"))
    caught_up = read_lines(page)
    assert len(caught_up) == FEED_MAX
    assert len(set(caught_up)) == len(caught_up), "a line is shown twice"
    # The newest lines read as a fresh load shows them.
    fresh = page.context.new_page()
    fresh.goto("/")
    assert caught_up[:FEED_HISTORY] == read_lines(fresh)


def test_the_ledger_s_count_and_pager_catch_up_with_its_rows(page: Page) -> None:
    lea = user("lea", Role.OPERATOR)
    UserPreference.objects.create(user=lea, page_size=10)
    for _ in range(10):
        state.enqueue("noop", {})
    log_in(page, "lea", "/settings")
    stream = hold_the_stream(page, "/jobs?type=noop&status=pending")
    count = page.locator(".page-head p")
    expect(count).to_have_text("10 jobs match these filters. Rows update live.")
    expect(page.locator("nav.pager")).to_have_count(0)

    newer = [state.enqueue("noop", {}) for _ in range(2)]  # their events reach no one
    let_go(page, stream)

    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    rows = page.locator("#ledger-rows tr")
    expect(rows.first).to_have_id(f"job-{newer[1]['id']}")
    expect(rows).to_have_count(10)
    expect(count).to_have_text("12 jobs match these filters. Rows update live.")
    pager = page.locator("nav.pager")
    expect(pager.locator(".muted")).to_have_text("Page 1 of 2")
    expect(pager.locator("a")).to_have_attribute("href", "?type=noop&status=pending&page=2")
    expect(page.locator("#bulk-actions")).to_have_text("Cancel all 12 matching…")


def test_an_empty_ledger_catches_up_after_the_server_was_away(
    open_page: Callable[[str], Page], console_server: Callable[..., ConsoleServer]
) -> None:
    server = console_server()
    user("max", Role.VIEWER)
    page = open_page(server.url)
    log_in(page, "max", "/jobs")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    count = page.locator(".page-head p")
    expect(count).to_have_text("0 jobs. Rows update live.")
    expect(page.locator("p.empty")).to_have_text("No job matches.")

    server.stop()
    expect(page.locator("#live .live-text")).to_have_text("Reconnecting")
    job = state.enqueue("noop", {})  # its job.created reaches no one
    server.start()

    expect(page.locator("#live .live-text")).to_have_text("Live")
    expect(page.locator(f"#job-{job['id']} .pill")).to_have_text("Pending")
    expect(count).to_have_text("1 job. Rows update live.")
    expect(page.locator("p.empty")).to_have_count(0)
