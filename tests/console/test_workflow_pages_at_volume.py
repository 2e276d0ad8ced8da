"""Job Detail and DLQ Detail of a fan-in or a fan-out: the page costs the same queries
however many jobs the job waits for or holds up, and lists a bounded number of them, the
unfinished first, saying how many more there are. A join of 1,000 upstream jobs took 1,027
queries, 1.4 s and 600 kB (each upstream job listed twice, each pill asking whether its
queue is paused); a dead letter holding up 1,000 jobs, 1,019 queries."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from jobs import queues, state

from .helpers import completed, dead_letter

pytestmark = pytest.mark.django_db

LISTED = 4


@pytest.fixture(autouse=True)
def _few_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jobs.console.selectors.DEPENDENCIES_LISTED", LISTED, raising=False)


def fan_in(upstream: int) -> dict[str, Any]:
    """A job waiting for `upstream` jobs, the first of which completed."""
    first = completed()
    others = state.enqueue_many([state.JobSpec("noop", {"n": n}) for n in range(upstream - 1)])
    return state.enqueue("noop", {}, depends_on=[uuid.UUID(j["id"]) for j in [first, *others]])


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, follow=True)
    assert response.status_code == 200, url
    return len(captured)


def panel(page: str, heading: str) -> str:
    start = page.index(f"<h2>{heading}</h2>")
    return page[start : page.index("</section>", start)]


def test_a_fan_in_jobs_page_costs_the_same_however_many_jobs_it_waits_for(
    as_viewer: Client,
) -> None:
    queues.pause("held")  # a pill of a pending job asks whether its queue is paused
    few, many = fan_in(6), fan_in(12)
    assert queries(as_viewer, f"/jobs/{few['id']}") == queries(as_viewer, f"/jobs/{many['id']}")

    page = as_viewer.get(f"/jobs/{many['id']}").content.decode()
    upstream = panel(page, "Upstream")
    assert upstream.count('class="list-row"') == LISTED
    assert "pill-completed" not in upstream  # what it waits for comes first
    assert "8 more not shown (12 in all; those still to finish are listed first)" in upstream
    # Why isn't it running? names the 11 it waits for, listing as many.
    why = panel(page, "Why isn't it running?")
    assert "It waits for 11 upstream jobs" in why
    assert why.count('class="list-row"') == LISTED
    assert "7 more not shown (11 in all)" in why


def test_a_dead_letters_page_costs_the_same_however_many_jobs_it_holds_up(
    as_viewer: Client,
) -> None:
    pages = []
    for dependents in (6, 12):
        dead = dead_letter()
        for _ in range(dependents):
            state.enqueue("noop", {}, depends_on=uuid.UUID(dead["id"]))
        pages.append(f"/dlq/{dead['id']}")
    assert queries(as_viewer, pages[0]) == queries(as_viewer, pages[1])

    waiting = panel(as_viewer.get(pages[1]).content.decode(), "Dependents")
    assert waiting.count('class="list-row"') == LISTED
    assert "8 more not shown (12 in all; those still to finish are listed first)" in waiting
