"""Live panels in a real browser, where no job event comes to refresh them or their refresh
meets a reader: node health with every worker gone quiet, a status-filtered ledger that jobs
move into, keyboard focus in a panel being refreshed, and the ledger's row at 390 px.

Runs on tests/console/browser.py's fixtures, on the same xdist worker as test_browser.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, Response, expect

from jobs import state
from jobs.models import Job, Worker
from jobs.representation import short_id
from jobs.roles import Role

from ..attempts import fail_attempt
from .browser import log_in, screenshot, user
from .helpers import completed, dead_letter, make_worker, start

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("console_browser"),
]

# Longer than the node panel's period (the heartbeat interval, 5 s by default) on a busy
# machine.
WITHIN_A_PERIOD_MS = 20_000


def is_catch_up_of(path: str) -> Callable[[Response], bool]:
    """The catch-up's read of `path` once the stream is live (not the page's own load)."""
    return lambda response: (
        response.request.resource_type in ("fetch", "xhr") and path in response.url
    )


def test_a_worker_that_stops_beating_is_flagged_stale_with_no_job_event(page: Page) -> None:
    worker = make_worker(hostname="node-quiet")
    user("nell", Role.OPERATOR)
    # The panel's read once the stream is live: what it says is from before the change below.
    catch_up = is_catch_up_of("/dashboard/nodes")
    with page.expect_response(catch_up):
        log_in(page, "nell")
    row = page.locator("#nodes tr", has_text="node-quiet")
    expect(row.locator(".pill")).to_have_text("Running")

    # kill -9: the row stays, its heartbeat stops; no job changes, so no event comes.
    Worker.objects.filter(id=worker.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    expect(row.locator(".pill")).to_have_text("Stale", timeout=WITHIN_A_PERIOD_MS)
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_a_status_filtered_ledger_shows_the_jobs_that_move_into_its_status(page: Page) -> None:
    dead_letter("flaky", {}, "first")
    # Created before the page: the only events of it the page gets are its moves.
    moving = state.enqueue("flaky", {}, max_retries=1)
    user("noor", Role.VIEWER)
    catch_up = is_catch_up_of("/jobs?")
    with page.expect_response(catch_up):
        log_in(page, "noor", "/jobs?status=dlq&type=flaky")
    rows = page.locator("#ledger-rows tr")
    count = page.locator("#ledger-count")
    expect(rows).to_have_count(1)
    expect(count).to_have_text("1 job matches these filters. Rows update live.")

    claimed = start(moving["id"])
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="HandlerFailure",
        error_message="second",
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
    )

    expect(rows).to_have_count(2)
    expect(rows.first).to_have_id(f"job-{moving['id']}")
    expect(rows.first.locator(".pill")).to_have_text("DLQ")
    expect(count).to_have_text("2 jobs match these filters. Rows update live.")

    # Any status: a job that starts joins a ledger of processing jobs.
    waiting = state.enqueue("noop", {})
    with page.expect_response(catch_up):
        page.goto("/jobs?status=processing")
    expect(page.locator("p.empty")).to_have_text("No job matches.")
    start(waiting["id"])
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".pill")).to_have_text("Processing")
    expect(count).to_have_text("1 job matches these filters. Rows update live.")


def test_keyboard_focus_stays_on_its_link_through_a_refresh(page: Page) -> None:
    running = state.enqueue("noop", {})
    start(running["id"])
    user("omar", Role.OPERATOR)
    log_in(page, "omar")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    link = page.locator(f'#active-jobs a[href="/jobs/{running["id"]}"]')
    link.focus()

    # Another job starts: the panel is read again and swapped in under the focused link.
    other = state.enqueue("noop", {})
    start(other["id"])
    expect(page.locator("#active-jobs")).to_contain_text(short_id(other["id"]))
    expect(link).to_be_focused()
    # The live log gets a line an event: a live region of it would read each one aloud.
    live_region = page.locator("#log-feed").evaluate(
        "(feed) => feed.closest('[aria-live]:not([aria-live=off])')?.id ?? null"
    )
    assert live_region is None

    # The job's page, refreshed as its job changes.
    page.goto(f"/jobs/{other['id']}")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    crumb = page.locator("#job-main .crumbs a")
    crumb.focus()
    state.cancel(uuid.UUID(other["id"]))
    expect(page.locator("#job-main h1 .pill")).to_have_text("Cancelled")
    expect(crumb).to_be_focused()


def test_at_390_px_a_row_s_buttons_leave_its_status_readable(page: Page) -> None:
    completed()
    dead_letter()
    state.enqueue("generate_report", {"report": "weekly"})
    running = state.enqueue("send_email", {"to": "ops@example.com", "subject": "hi"})
    start(running["id"])
    Job.objects.filter(type="noop").update(type="reports.generate_quarterly_summary")
    user("pia", Role.OPERATOR)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, "pia", "/jobs")
    rows = page.locator("#ledger-rows tr")
    expect(rows).to_have_count(4)
    # Each status pill whole in sight: inside the table's scrolled panel, clear of the
    # buttons that stay at the row's right edge.
    covered = rows.evaluate_all(
        """(rows) => rows.filter((row) => {
             const pill = row.querySelector(".pill").getBoundingClientRect();
             const buttons = row.querySelector("td.actions").getBoundingClientRect();
             const panel = row.closest(".table-wrap").getBoundingClientRect();
             return pill.left < panel.left || pill.right > Math.min(buttons.left, panel.right);
           }).map((row) => row.querySelector(".pill").textContent)"""
    )
    screenshot(page, "ledger-390-status")
    assert covered == []
    # The buttons are still in sight, and the page does not scroll sideways.
    expect(page.locator(f"#job-{running['id']} .actions summary")).to_be_in_viewport(ratio=1)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
