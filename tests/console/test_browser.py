"""The console in a real browser: Debian's Chromium driven by Playwright, against daphne
serving this test database, so the SSE stream and HTMX run for real.

The server, the browser and the pages are tests/console/browser.py's fixtures (one browser
and one server per module, a fresh browser context each test); each test saves a screenshot
under tests/artifacts/.
"""

from __future__ import annotations

import json
import unicodedata
import urllib.request
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from django.utils import timezone
from playwright.sync_api import APIResponse, Page, Route, expect

from jobs import state
from jobs.api.auth import issue_token
from jobs.console import graph_svg
from jobs.display import reveal_bidi
from jobs.models import Job, JobLog, JobStatus, UserPreference
from jobs.representation import short_id
from jobs.roles import Role

from ..attempts import fail_attempt
from .browser import ConsoleServer, log_in, screenshot, user
from .helpers import dead_letter, make_worker, start
from .test_stream import RedisServer

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # One xdist worker takes the whole module: one server and one browser, not one each.
    pytest.mark.xdist_group("console_browser"),
]


def api_post(
    base_url: str, token: str, path: str, body: dict[str, Any], status: int = 201
) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - our own server on 127.0.0.1
        base_url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.status == status
        return dict(json.loads(response.read()))


def test_login_then_a_job_created_through_the_api_shows_up_live(
    page: Page, live_server_url: str
) -> None:
    operator = user("olga", Role.OPERATOR)
    token = issue_token(operator)
    log_in(page, "olga")
    expect(page.locator("h1")).to_have_text("Dashboard")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    pending = page.locator('.stat-card [data-stat="pending"]')
    expect(pending).to_have_text("0")

    job = api_post(
        live_server_url, token, "/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 1}
    )

    # No reload: the stat card and the live log follow the SSE stream.
    expect(pending).to_have_text("1")
    newest_line = page.locator("#log-feed .feed-line").first
    expect(newest_line).to_contain_text(short_id(job["id"]))
    # console.js labels the pill from the display-state table the page handed it.
    expect(newest_line.locator(".pill")).to_have_text("Pending")
    start(job["id"])  # a worker picks it up
    expect(page.locator('.stat-card [data-stat="processing"]')).to_have_text("1")
    expect(newest_line.locator(".pill")).to_have_text("Processing")
    expect(page.locator("#active-jobs")).to_contain_text(short_id(job["id"]))
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    screenshot(page, "dashboard-live")

    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "dashboard-390")


def test_the_longest_names_and_unbroken_errors_stay_inside_the_page(page: Page) -> None:
    # A type and a queue as long as their columns allow, an error that is one long token
    # (a URL, a path): wrapped or cut, never widening the page.
    long_type = "reports.generate_the_quarterly_" + "x" * 69
    long_queue = "reports." + "q" * 92
    long_error = "https://example.com/" + "a" * 300
    dead = dead_letter("flaky", {}, long_error)
    waiting = state.enqueue("noop", {})
    Job.objects.filter(id__in=[dead["id"], waiting["id"]]).update(type=long_type, queue=long_queue)
    # A fan-in of 20: its graph is wider than any screen.
    upstream = [uuid.UUID(state.enqueue("noop", {})["id"]) for _ in range(20)]
    join = state.enqueue("noop", {}, depends_on=upstream)
    user("lena", Role.OPERATOR)  # an operator's pages hold the forms too
    log_in(page, "lena")
    overflowing, node_widths = [], set()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        for path in ["/", f"/dlq/{dead['id']}", f"/jobs/{waiting['id']}", f"/jobs/{join['id']}"]:
            page.goto(path)
            if page.evaluate("document.documentElement.scrollWidth > window.innerWidth"):
                overflowing.append((width, path))
        # A row's buttons are in sight, not past the end of a table scrolled in its panel.
        page.goto(f"/jobs?queue={long_queue}")
        expect(page.locator(f"#job-{waiting['id']} .actions button").first).to_be_in_viewport(
            ratio=1
        )
        page.goto(f"/jobs/{join['id']}")
        box = page.locator(".job-graph .graph-node rect").first.bounding_box()
        node_widths.add(round(box["width"]) if box else None)
        # The panel opens on this job, not on the middle of its upstream row.
        page.locator("#job-graph h2").scroll_into_view_if_needed()
        expect(page.locator(f'.job-graph a[href="/jobs/{join["id"]}"]')).to_be_in_viewport()
    assert overflowing == []
    # The graph scrolls in its panel at its own size (a box and its 1-pixel border) rather
    # than shrinking to a strip.
    assert node_widths == {graph_svg.NODE_W + 1}


def test_filter_the_ledger_and_watch_a_row_change(page: Page) -> None:
    fern = user("fern", Role.VIEWER)
    UserPreference.objects.create(user=fern, theme="dark")
    report = state.enqueue("generate_report", {"report": "weekly"}, priority=1)
    for _ in range(3):
        state.enqueue("noop", {}, priority=3)
    log_in(page, "fern", "/jobs")
    expect(page.locator("#ledger-rows tr")).to_have_count(4)

    page.select_option('select[name="type"]', "generate_report")
    page.click("text=Apply filters")
    page.wait_for_url("**/jobs?type=generate_report")  # empty filters are left out
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    rows = page.locator("#ledger-rows tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("generate_report")
    expect(page.locator(f"#job-{report['id']} .pill")).to_have_text("Pending")

    state.cancel(uuid.UUID(report["id"]))  # another operator, elsewhere
    expect(page.locator(f"#job-{report['id']} .pill")).to_have_text("Cancelled")
    expect(page.locator("button", has_text="Cancel")).to_have_count(0)  # a viewer's ledger

    # New jobs are prepended live, but only those that pass the ledger's filters.
    state.enqueue("noop", {}, priority=2)
    newer = state.enqueue("generate_report", {"report": "daily"}, priority=2)
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_id(f"job-{newer['id']}")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    screenshot(page, "ledger-filtered-dark")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "ledger-390-dark")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


# The page's background and text (`--bg`, `--text`) and a pending job's pill (`--pending-fg`).
LIGHT = ("rgb(244, 246, 249)", "rgb(22, 27, 38)", "rgb(45, 79, 179)")
DARK = ("rgb(14, 17, 22)", "rgb(231, 234, 240)", "rgb(169, 193, 255)")


def test_the_theme_is_the_preference_else_the_system_s(page: Page) -> None:
    tess = user("tess", Role.VIEWER)
    state.enqueue("noop", {})
    log_in(page, "tess", "/jobs")
    cases: list[tuple[str, Literal["light", "dark"], tuple[str, ...]]] = [
        ("light", "dark", LIGHT),
        ("dark", "light", DARK),
        ("system", "light", LIGHT),
        ("system", "dark", DARK),
    ]
    for theme, system, colours in cases:
        UserPreference.objects.update_or_create(user=tess, defaults={"theme": theme})
        page.emulate_media(color_scheme=system)
        page.reload()
        shown = page.evaluate(
            """[getComputedStyle(document.body).backgroundColor,
                getComputedStyle(document.body).color,
                getComputedStyle(document.querySelector("#ledger-rows .pill")).color]"""
        )
        assert tuple(shown) == colours, (theme, system)


# Each field a user types into or picks from, by the page's path and the field's name, with the
# colours it is drawn in where they are not the dark theme's (`--surface`, `--text`, `--border`).
FIELDS_OFF_THEME = """() => [...document.querySelectorAll(
    "main input:not([type=hidden], [type=checkbox], [type=radio]), main select, main textarea")]
  .map((field) => [field.name, getComputedStyle(field)])
  .map(([name, drawn]) => [name, drawn.backgroundColor, drawn.color, drawn.borderTopColor])
  .filter(([, ...colours]) =>
    colours.join() !== "rgb(22, 26, 33),rgb(231, 234, 240),rgb(42, 48, 59)")
  .map((field) => [location.pathname, ...field])"""


def test_every_field_is_drawn_in_the_theme(page: Page) -> None:
    UserPreference.objects.create(
        user=user("dana", Role.OPERATOR, is_staff=True, is_superuser=True), theme="dark"
    )
    log_in(page, "dana")
    dead = dead_letter("send_email", {"to": "ops@example.com", "subject": "hi"})
    off_theme, fields = [], 0
    pages = ["/jobs", "/jobs/new", "/dlq", f"/dlq/{dead['id']}", "/audit", "/queues", "/settings"]
    for path in pages:
        page.goto(path)
        fields += page.locator("main select, main textarea, main input:not([type=hidden])").count()
        off_theme += page.evaluate(FIELDS_OFF_THEME)
    assert fields > 20
    assert off_theme == []
    # The DLQ's search box shows its whole hint ("job id, type, or words of the error").
    page.goto("/dlq")
    search = page.locator('input[name="q"]')
    hint_width = search.evaluate(
        """(field) => { const ruler = document.createElement("canvas").getContext("2d");
                        ruler.font = getComputedStyle(field).font;
                        return ruler.measureText(field.placeholder).width; }"""
    )
    assert search.evaluate("(field) => field.clientWidth") > hint_width
    # The dependency graph outlines the job of the page in the theme's text colour (it was
    # near-black, invisible on the dark theme's panel).
    upstream = state.enqueue("noop", {})
    job = state.enqueue("noop", {}, depends_on=uuid.UUID(upstream["id"]))
    page.goto(f"/jobs/{job['id']}")
    outline, text = page.evaluate(
        f"""[getComputedStyle(document.querySelector('.job-graph a[href="/jobs/{job["id"]}"] rect'))
              .stroke, getComputedStyle(document.body).color]"""
    )
    assert outline == text


def test_a_bad_payload_is_shown_next_to_the_payload_field(page: Page) -> None:
    user("otto", Role.OPERATOR)
    log_in(page, "otto", "/jobs/new")
    page.select_option('select[name="type"]', "send_email")
    page.fill('textarea[name="payload"]', '{"subject": "Quarterly numbers"}')
    page.click("text=Create job")
    error = page.locator("#field-payload .field-error")
    expect(error).to_have_text("payload.to: This field is required.")
    expect(page.locator('textarea[name="payload"]')).to_have_value(
        '{"subject": "Quarterly numbers"}'
    )
    assert Job.objects.count() == 0
    screenshot(page, "create-job-error")


def test_retry_a_dead_letter_from_its_detail_page(page: Page) -> None:
    user("olive", Role.OPERATOR)
    dead = dead_letter("send_email", {"to": "ops@example.com", "subject": "hi"}, "SMTP 554")
    log_in(page, "olive", f"/dlq/{dead['id']}")
    expect(page.locator("h1 .pill")).to_have_text("DLQ")
    expect(page.locator("svg.timeline")).to_be_visible()
    expect(page.locator(".attempt")).to_contain_text("SMTP 554")
    screenshot(page, "dlq-detail")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "dlq-detail-390")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.click("#retry-button")
    page.wait_for_url(f"**/jobs/{dead['id']}")
    expect(page.locator(".flash-success")).to_contain_text("left the dead-letter queue")
    expect(page.locator("h1 .pill")).to_have_text("Pending")
    assert Job.objects.get(id=dead["id"]).status == JobStatus.PENDING
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    start(dead["id"])  # a worker claims the retried job: its page follows without a reload
    expect(page.locator("h1 .pill")).to_have_text("Processing")
    expect(page.locator(".attempt")).to_have_count(2)

    page.goto("/dlq")
    expect(page.locator(f"#job-{dead['id']}")).to_have_count(0)
    expect(page.locator('[data-stat="dlq"]')).to_have_text("0")
    # The groups' title stands inside its panel, as every panel's does, not on its border.
    inset = page.evaluate(
        """(() => {
          const title = document.querySelector("#dlq-groups .panel-title");
          const text = document.createRange();
          text.selectNodeContents(title);
          const [panel, words] = [title.parentElement, text].map((b) => b.getBoundingClientRect());
          return [words.left - panel.left, words.top - panel.top];
        })()"""
    )
    assert min(inset) >= 16
    screenshot(page, "dlq-after-retry")


# Each text of the page's charts: its size as drawn (the font's, scaled by the SVG's
# viewBox, if any) and whether it is inside the visible part of its panel.
CHART_TEXTS = """() => [...document.querySelectorAll("svg.chart text")].map((label) => {
  const scale = label.getScreenCTM();
  const [box, drawn] = [label.closest(".chart-box"), label].map((e) => e.getBoundingClientRect());
  return {
    text: label.textContent,
    size: parseFloat(getComputedStyle(label).fontSize) * Math.hypot(scale.c, scale.d),
    inside: drawn.left >= box.left - 0.5 && drawn.right <= box.right + 0.5,
  };
})"""


def test_the_dlq_charts_are_readable_on_a_phone(page: Page) -> None:
    for _ in range(3):
        dead_letter("flaky", {}, "upstream answered 503 Service Unavailable after 30 s")
    dead_letter("http_request", {"url": "http://127.0.0.1:9/"}, "connection refused")
    user("rhea", Role.VIEWER)
    log_in(page, "rhea", "/dlq")
    expect(page.locator("svg.chart")).to_have_count(3)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        texts = page.evaluate(CHART_TEXTS)
        # Two bars of two labels each per bar chart, the top count and 8 hours on the time axis.
        assert len(texts) == 17
        # They were drawn at 4 to 7 px on a phone: the charts shrank to the width of the panel.
        assert [t for t in texts if t["size"] < 10 or not t["inside"]] == [], width
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        screenshot(page, f"dlq-charts-{width}")


def test_what_became_of_a_webhook_is_said_in_its_section(page: Page) -> None:
    user("wendy", Role.OPERATOR)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, "wendy", "/settings")
    page.fill('input[name="url"]', "https://hooks.example.com/hooks")
    page.check('input[name="event_types"][value="job.dlq_entry"]')
    page.fill('input[name="secret"]', "whsec-123")
    page.click("text=Add webhook")
    page.wait_for_url("**/settings#webhooks")
    # The page opens on the webhooks: the message was at its top, out of sight.
    said = page.locator("#webhooks .flash")
    expect(said).to_have_text("Webhook added.")
    expect(said).to_be_in_viewport(ratio=1)
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 844})
        with page.expect_navigation():
            page.click("text=Send test")
        delivery = Job.objects.filter(type="http_request").latest("created_at")
        expect(said).to_have_text(f"Test delivery queued as job {short_id(delivery.id)}.")
        expect(said).to_be_in_viewport(ratio=1)
        expect(page.locator(".flash")).to_have_count(1)
        screenshot(page, f"settings-webhook-tested-{width}")


def test_the_admin_retry_action_takes_a_job_out_of_the_dlq(page: Page) -> None:
    user("ada", None, is_staff=True, is_superuser=True)
    dead = dead_letter("http_request", {"url": "http://127.0.0.1:9/hook"}, "connection refused")
    kept = dead_letter("flaky", {}, "simulated failure")
    page.goto("/admin/jobs/deadletterjob/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-ada")
    page.click('input[type="submit"]')
    page.wait_for_url("**/admin/jobs/deadletterjob/")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)

    page.check(f'input[name="_selected_action"][value="{dead["id"]}"]')
    page.select_option('select[name="action"]', "retry_selected")
    page.click('button[name="index"]')
    expect(page.locator(".messagelist")).to_contain_text("Retried 1 job(s)")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text(kept["id"])
    screenshot(page, "admin-dlq-retry")
    retried = Job.objects.get(id=dead["id"])
    assert retried.status == JobStatus.PENDING and not retried.in_dlq
    assert Job.objects.get(id=kept["id"]).in_dlq


def test_the_admin_marks_dead_letters_and_stale_workers_in_red(page: Page) -> None:
    user("ada", None, is_staff=True, is_superuser=True)
    dead = dead_letter("flaky", {}, "simulated failure")
    live = state.enqueue("noop", {})
    make_worker(heartbeat_age=3600, hostname="node-gone")
    page.goto("/admin/jobs/job/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-ada")
    page.click('input[type="submit"]')
    page.wait_for_url("**/admin/jobs/job/")
    # Django's admin, light: its error colour (`--error-fg`) and its text colour.
    status = page.locator("#result_list td.field-status_label")
    expect(status.filter(has_text="in the dead-letter queue").locator("span")).to_have_css(
        "color", "rgb(186, 33, 33)"
    )
    expect(status.filter(has_text="Pending")).to_have_css("color", "rgb(51, 51, 51)")
    assert live["status"] == "pending" and dead["in_dlq"]
    page.goto("/admin/jobs/worker/")
    expect(page.locator("td.field-heartbeat strong")).to_contain_text("stale")
    expect(page.locator("td.field-heartbeat strong")).to_have_css("color", "rgb(186, 33, 33)")


def test_every_console_page_has_a_csp_that_blocks_inline_script(
    page: Page, csp_violations: list[str]
) -> None:
    user("cora", Role.OPERATOR)
    dead = dead_letter("flaky", {}, "simulated failure")
    log_in(page, "cora")
    for path in ["/", "/jobs", "/jobs/new", f"/jobs/{dead['id']}", "/dlq", "/settings"]:
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, path
    expect(page.locator("#live")).to_have_attribute("data-state", "open")

    # The policy is enforced, and a violation would be seen by the other tests.
    page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.injected = true";
            document.body.appendChild(script);
        }"""
    )
    page.wait_for_timeout(200)
    assert page.evaluate("window.injected === undefined")
    assert any("script-src" in violation for violation in csp_violations)
    csp_violations.clear()


# --- live updates: bursts, catching up, the end of a session ----------------------------------


def test_a_burst_of_changes_and_new_jobs_all_reach_the_ledger(
    page: Page, live_server_url: str
) -> None:
    """Each event's row was fetched with document.body as htmx's request lock, whose queue
    keeps only the last waiting request: of a burst, all but a row or two were dropped."""
    token = issue_token(user("bruno", Role.OPERATOR))
    parent = state.enqueue("noop", {})
    for _ in range(8):
        state.enqueue("noop", {}, depends_on=uuid.UUID(parent["id"]))
    log_in(page, "bruno", "/jobs")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    rows = page.locator("#ledger-rows tr")
    expect(rows.filter(has_text="Blocked")).to_have_count(8)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))

    api_post(live_server_url, token, f"/api/v1/jobs/{parent['id']}/cancel", {}, status=200)
    expect(rows.filter(has_text="Cancelled")).to_have_count(9)
    six = {"jobs": [{"type": "noop", "payload": {}, "priority": 2}] * 6}
    batch = api_post(live_server_url, token, "/api/v1/jobs/batch", six)
    expect(rows).to_have_count(15)
    # The new jobs on top, newest first as the ledger orders them.
    shown = rows.evaluate_all("(rows) => rows.map((row) => row.id)")
    assert set(shown[:6]) == {f"job-{job['id']}" for job in batch["jobs"]}
    # 15 events, a request each, would be 15.
    assert len(asked) < 15, asked


def test_a_job_page_shows_what_happened_before_its_stream_connected(page: Page) -> None:
    """A page is rendered, then its stream subscribes: what happened in between (a bulk job
    finishing soon after its page opened) was never shown, under a "Live" dot."""
    user("carl", Role.VIEWER)
    log_in(page, "carl")
    job = state.enqueue("noop", {})
    held: list[Route] = []
    page.route("**/api/jobs/stream", lambda route: held.append(route))
    page.goto(f"/jobs/{job['id']}")
    expect(page.locator("h1 .pill")).to_have_text("Pending")
    while not held:
        page.wait_for_timeout(50)

    claimed = start(job["id"])
    state.complete([state.Success(claimed.id, claimed.attempt_id, {"ok": True}, timezone.now())])
    held[0].continue_()
    page.unroute("**/api/jobs/stream")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    expect(page.locator("h1 .pill")).to_have_text("Completed")


def test_a_job_page_shows_a_change_that_came_while_it_refreshed(page: Page) -> None:
    """The job page was refreshed by replacing its panel: a refresh asked for while one
    loaded waited on the panel that the first one then replaced, and was dropped, so the
    page stayed "Processing" (a bulk job's, after it had finished)."""
    user("ivy", Role.VIEWER)
    job = state.enqueue("flaky", {}, max_retries=1)
    log_in(page, "ivy", f"/jobs/{job['id']}")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    held: list[tuple[Route, APIResponse]] = []

    def hold_the_first(route: Route) -> None:
        if held:
            route.continue_()
        else:  # answered as of now, and given to the page later
            held.append((route, route.fetch()))

    page.route(f"**/jobs/{job['id']}", hold_the_first)
    claimed = start(job["id"])
    while not held:
        page.wait_for_timeout(50)
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="HandlerFailure",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
    )
    # The counters come after the job's events: the page has had its job.dlq_entry.
    expect(page.locator('[data-stat="dlq"]')).to_have_text("1")
    route, answer = held[0]
    route.fulfill(response=answer)
    expect(page.locator("h1 .pill")).to_have_text("DLQ")


def test_a_payload_being_edited_stays_through_a_refresh_of_its_page(page: Page) -> None:
    """The page is refreshed once its stream connects (and on every reconnection) when
    something changed meanwhile: DLQ Detail's payload editor is part of it, and what the
    operator types must stay."""
    user("jay", Role.OPERATOR)
    dead = dead_letter("send_email", {"to": "ops@example.com", "subject": "hi"})
    log_in(page, "jay")
    held: list[Route] = []
    page.route("**/api/jobs/stream", lambda route: held.append(route))
    page.goto(f"/dlq/{dead['id']}")
    editor = page.locator('textarea[name="payload"]')
    typed = '{"to": "ops@example.com", "subject": "hello"}'
    editor.fill(typed)
    heading = page.locator("#job-main h1").element_handle()
    while not held:
        page.wait_for_timeout(50)
    # Changed before the stream connected: the catch-up's refresh shows it.
    Job.objects.filter(id=dead["id"]).update(last_error="a newer error")

    held[0].continue_()
    page.unroute("**/api/jobs/stream")
    page.wait_for_function("(heading) => !heading.isConnected", arg=heading)
    expect(editor).to_have_value(typed)


def test_the_ledger_catches_up_after_the_server_was_away(
    open_page: Callable[[str], Page], console_server: Callable[..., ConsoleServer]
) -> None:
    server = console_server()
    jobs = [state.enqueue("noop", {}) for _ in range(3)]
    user("dina", Role.VIEWER)
    page = open_page(server.url)
    log_in(page, "dina", "/jobs")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    pills = page.locator("#ledger-rows .pill")
    expect(pills.filter(has_text="Pending")).to_have_count(3)

    server.stop()
    expect(page.locator("#live .live-text")).to_have_text("Reconnecting")
    for job in jobs:  # their events reach no one
        state.cancel(uuid.UUID(job["id"]))
    server.start()
    expect(page.locator("#live .live-text")).to_have_text("Live")
    expect(pills.filter(has_text="Cancelled")).to_have_count(3)


def test_the_ledger_catches_up_after_redis_was_away(
    open_page: Callable[[str], Page],
    console_server: Callable[..., ConsoleServer],
    tmp_path: Path,
    settings: Any,
) -> None:
    own_redis = RedisServer(tmp_path)
    own_redis.start()
    try:
        settings.REDIS_URL = own_redis.url  # this process publishes where the server listens
        server = console_server(REDIS_URL=own_redis.url)
        user("emil", Role.VIEWER)
        page = open_page(server.url)
        log_in(page, "emil", "/jobs")
        expect(page.locator("#live .live-text")).to_have_text("Live")

        own_redis.stop()
        expect(page.locator("#live .live-text")).to_have_text("Events paused")
        job = state.enqueue("noop", {})  # its job.created is lost
        own_redis.start()
        expect(page.locator("#live .live-text")).to_have_text("Live", timeout=30_000)
        expect(page.locator(f"#job-{job['id']} .pill")).to_have_text("Pending")
    finally:
        own_redis.stop()


def test_a_tab_whose_session_ended_elsewhere_says_so_and_stops_reconnecting(
    open_page: Callable[[str], Page], console_server: Callable[..., ConsoleServer]
) -> None:
    """The stream's reconnection got 401 from then on, and the tab said "Reconnecting" for
    ever, retrying."""
    # The stream checks its session at each keep-alive beat.
    server = console_server(SSE_KEEPALIVE_SECONDS="1")
    user("fay", Role.VIEWER)
    page = open_page(server.url)
    log_in(page, "fay", "/jobs?type=noop")
    expect(page.locator("#live .live-text")).to_have_text("Live")

    elsewhere = page.context.new_page()
    elsewhere.goto("/settings")
    elsewhere.click("text=Log out")
    elsewhere.wait_for_url("**/accounts/login/")
    elsewhere.close()

    expect(page.locator("#live .live-text")).to_have_text("Signed out")
    notice = page.locator("#session-ended")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("session has ended")
    expect(notice.locator("a")).to_have_attribute(
        "href", "/accounts/login/?next=%2Fjobs%3Ftype%3Dnoop"
    )
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    # Longer than EventSource's and htmx's waits before a retry at this point.
    page.wait_for_timeout(4000)
    assert asked == []

    notice.locator("a").click()
    page.fill('input[name="username"]', "fay")
    page.fill('input[name="password"]', "pw-fay")
    page.click('button[type="submit"]')
    page.wait_for_url("**/jobs?type=noop")
    expect(page.locator("#live .live-text")).to_have_text("Live")


def test_a_log_line_is_shown_as_written(page: Page) -> None:
    job = state.enqueue("noop", {})
    JobLog.objects.create(
        job_id=job["id"], created_at=timezone.now(), message="first line\n  second <b>line</b>"
    )
    user("gus", Role.VIEWER)
    log_in(page, "gus", f"/jobs/{job['id']}")
    line = page.locator(".logs li")
    expect(line).to_have_count(1)
    assert line.inner_text().endswith("first line\n  second <b>line</b>")


def test_cancelling_a_running_job_from_the_ledger_asks_first(page: Page) -> None:
    running = state.enqueue("noop", {})
    start(running["id"])
    waiting = state.enqueue("noop", {})
    user("hana", Role.OPERATOR)
    log_in(page, "hana", "/jobs")
    row = page.locator(f"#job-{running['id']}")
    row.locator("summary", has_text="Cancel…").click()
    confirm = row.locator(".confirm-box")
    expect(confirm).to_be_visible()
    assert Job.objects.get(id=running["id"]).status == JobStatus.PROCESSING
    confirm.locator("button", has_text="Cancel job").click()
    expect(row.locator(".pill")).to_have_text("Cancelled")
    # A job that has not started is cancelled with one click, as before.
    other = page.locator(f"#job-{waiting['id']}")
    other.locator("button", has_text="Cancel").click()
    expect(other.locator(".pill")).to_have_text("Cancelled")


def test_a_refresh_that_changes_nothing_leaves_the_page_as_the_reader_has_it(page: Page) -> None:
    """The catch-up after the stream connects re-reads the page: swapped in unchanged, it
    closed the stack trace the reader had opened and detached what they pointed at."""
    user("kim", Role.OPERATOR)
    dead = dead_letter("send_email", {"to": "ops@example.com", "subject": "hi"})
    log_in(page, "kim")
    page.goto(f"/dlq/{dead['id']}")
    heading = page.locator("#job-main h1").element_handle()
    refreshed = page.evaluate_handle(
        """() => new Promise((done) => document.addEventListener("htmx:afterRequest",
               (event) => { if (event.detail.elt.id === "job-main") done(true); }))"""
    )
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    assert refreshed.json_value() is True
    assert heading is not None and heading.evaluate("(node) => node.isConnected")


def test_a_live_feed_line_reveals_bidi_controls_as_the_server_does(page: Page) -> None:
    """A line added from an event showed a type or an error as written: a U+202E in it
    turned the rest of the line around, where the server's lines show the escape."""
    # Every format character (the category of each bidirectional control) and every one of
    # the blocks around the controls: console.js revealing other characters than
    # `reveal_bidi`, or fewer, shows one of them otherwise.
    near_controls = "".join(
        char
        for char in map(chr, range(0x110000))
        if unicodedata.category(char) == "Cf"
        or "\u0600" <= char <= "\u06ff"
        or "\u2000" <= char <= "\u206f"
    )
    user("bea", Role.VIEWER)
    log_in(page, "bea")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    mirrored = "flaky\u202elive\u202c\u2066x\u2069"
    job = state.enqueue("flaky", {}, max_retries=1)
    Job.objects.filter(id=job["id"]).update(type=mirrored)

    claimed = start(job["id"])
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="HandlerFailure",
        error_message=near_controls,
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
    )

    # The job.failed line just before it shows the job as it is by then, in the DLQ, too.
    line = page.locator('#log-feed .feed-line[data-event="job.dlq_entry"]')
    expect(line.locator(".pill")).to_have_text("DLQ")
    assert line.locator(".feed-job").text_content() == reveal_bidi(mirrored)
    shown_error = line.locator(".feed-detail").text_content()
    assert shown_error == "job.dlq_entry · " + reveal_bidi(near_controls)
    # The server's line of it, on a new page or read by a catch-up, reads the same: it cut
    # the error at 80 characters where the live line kept it whole (the stylesheet cuts
    # both to the line's width), so a catch-up before the event showed another text.
    page.reload()
    assert page.locator("#log-feed .feed-job").first.text_content() == reveal_bidi(mirrored)
    server_line = page.locator('#log-feed .feed-line[data-event="job.dlq_entry"]')
    assert server_line.locator(".feed-detail").text_content() == shown_error
