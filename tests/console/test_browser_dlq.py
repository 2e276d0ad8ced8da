"""The DLQ page in a real browser, where its behaviour is the browser's: how wide its charts
are drawn, and what it shows of dead letters that arrive or leave while it is open.

Runs on tests/console/browser.py's fixtures, on the same xdist worker as test_browser.py.
"""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Page, expect

from jobs import state
from jobs.representation import short_id
from jobs.roles import Role

from .browser import log_in, screenshot, user
from .helpers import dead_letter

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("console_browser"),
]

# For each chart: the px of its box it leaves unused, and the share of the box after its
# last bar ends.
CHART_WIDTHS = """() => [...document.querySelectorAll("svg.chart")].map((chart) => {
  const box = chart.closest(".chart-box").getBoundingClientRect();
  const bars = [...chart.querySelectorAll(".chart-bar")].map((bar) => bar.getBoundingClientRect());
  return {
    chart: chart.getAttribute("aria-label"),
    unused: Math.round(box.right - chart.getBoundingClientRect().right),
    afterLastBar: (box.right - Math.max(...bars.map((bar) => bar.right))) / box.width,
  };
})"""


def test_the_dlq_charts_take_the_whole_width_of_their_panels(page: Page) -> None:
    dead_letter("flaky", {}, "upstream answered 503")
    user("rhea", Role.VIEWER)
    log_in(page, "rhea", "/dlq")
    expect(page.locator("svg.chart")).to_have_count(3)
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        charts = page.evaluate(CHART_WIDTHS)
        # The hours' chart stopped at 960 px: at 1280 px, the right fifth of its panel
        # stayed empty, its grid lines too; the bars' charts stopped at 560 px.
        assert [c for c in charts if c["unused"] > 1] == [], width
        # The longest bar, and the column of the current hour, end at the panel's edge.
        assert [c for c in charts if c["afterLastBar"] > 0.01] == [], width
        screenshot(page, f"dlq-charts-wide-{width}")


def test_the_dlq_page_follows_dead_letters_that_arrive_and_leave(page: Page) -> None:
    first = dead_letter("flaky", {}, "upstream answered 503")
    user("olive", Role.OPERATOR)
    log_in(page, "olive", "/dlq")
    expect(page.locator("#live")).to_have_attribute("data-state", "open")
    heading = page.locator(".page-head .muted")
    expect(heading).to_contain_text("1 job used every attempt")
    tick = page.get_by_label(f"Select flaky {short_id(first['id'])}")
    tick.check()

    # Only the nav's badge followed: the list, its count, its groups and its charts stayed
    # as loaded until the operator reloaded the page.
    arrived = dead_letter("noop", {}, "bad input")
    rows = page.locator("#dlq-table tbody tr")
    expect(rows.first).to_have_id(f"job-{arrived['id']}")
    expect(rows).to_have_count(2)
    expect(heading).to_contain_text("2 jobs used every attempt")
    expect(page.locator("#dlq-groups")).to_contain_text("noop · HandlerFailure: bad input")
    expect(page.locator('svg[aria-label="Dead letters by job type"]')).to_contain_text("noop")
    expect(tick).to_be_checked()  # a row still listed is left as the operator has it

    state.retry_from_dlq(uuid.UUID(first["id"]))  # from another tab
    expect(rows).to_have_count(1)
    expect(heading).to_contain_text("1 job used every attempt")
    # A purge sends no event of the job it deletes: the DLQ's count says it left.
    state.purge(uuid.UUID(arrived["id"]))
    expect(rows).to_have_count(0)
    expect(page.locator("#dlq-table")).to_contain_text("The dead-letter queue is empty.")
    expect(page.locator("#dlq-groups")).to_contain_text("No dead letters.")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    screenshot(page, "dlq-live")
