"""A job type holding bidirectional controls is shown as escapes on every console page that
names it, as errors and URLs are (`reveal_bidi`): a type comes from a handler's name, but
seeded or older rows, and the Django tasks backend, may hold any text, and raw,
"\u202eevil\u202c" reads "live" in a heading, a row or a title."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs import queues, state
from jobs.models import Job, Schedule, Worker
from jobs.registry import registry
from jobs.representation import short_id
from tests.attempts import fail_attempt

from .helpers import make_worker, start, text

pytestmark = pytest.mark.django_db

SPOOFED = "\u202eevil\u202c"
SHOWN = "\\u202eevil\\u202c"


def shown_as_escapes(body: str, where: str) -> None:
    # A hidden field or an option's value carries the type back as stored: it is not shown.
    shown = re.sub(r'<input type="hidden"[^>]*>|<option value="[^"]*"', "", body)
    assert "\u202e" not in shown and "\u202c" not in shown, where
    assert SHOWN in shown, where


def as_history_holds(job: dict[str, Any]) -> uuid.UUID:
    """The job renamed in place, as a seeded or older row holds a type no handler has."""
    Job.objects.filter(id=job["id"]).update(type=SPOOFED)
    return uuid.UUID(job["id"])


@dataclass(frozen=True)
class History:
    worker: Worker
    running: uuid.UUID
    dead: uuid.UUID
    downstream: uuid.UUID
    waiting: uuid.UUID


@pytest.fixture
def history(as_operator: Client) -> History:
    worker = make_worker()
    running = as_history_holds(start(state.enqueue("noop", {})["id"], worker).job)
    upstream = state.enqueue("noop", {}, max_retries=1)
    downstream = as_history_holds(state.enqueue("noop", {}, depends_on=uuid.UUID(upstream["id"])))
    claimed = start(upstream["id"], worker)
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="HandlerFailure",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
    )
    dead = as_history_holds(upstream)
    waiting = as_history_holds(state.enqueue("noop", {}))
    # The running job fills it: the waiting one's explanation names the limit. Set from the
    # console, its audit entry names the type.
    limit = {"scope": "type", "name": SPOOFED, "max_running": 1}
    assert as_operator.post("/limits", limit).status_code == 302
    first_run = state.enqueue("noop", {}, cron="0 * * * *")
    as_history_holds(first_run)
    schedule = Job.objects.get(id=first_run["id"]).schedule_id
    assert schedule is not None
    Schedule.objects.filter(id=schedule).update(type=SPOOFED)
    # Its audit entry names the schedule by its type.
    assert as_operator.post(f"/schedules/{schedule}/pause").status_code == 302
    return History(worker, running, dead, downstream, waiting)


# Each page naming a type, by the job of the history it shows.
PAGES: dict[str, Callable[[History], str]] = {
    # Active jobs, DLQ insight (top types, their titles, newest failures), the feed.
    "dashboard": lambda h: "/",
    "ledger": lambda h: "/jobs",
    "ledger row": lambda h: f"/jobs/{h.running}/row",
    "running job": lambda h: f"/jobs/{h.running}",
    # Its fields, and "Why isn't it running?": the limit on its type is full.
    "waiting job": lambda h: f"/jobs/{h.waiting}",
    # Its upstream dead letter: the explanation, the alert, the upstream list.
    "downstream job": lambda h: f"/jobs/{h.downstream}",
    # Its dependents.
    "dead letter": lambda h: f"/dlq/{h.dead}",
    # The table, its checkboxes' labels, the chart by type.
    "dlq": lambda h: "/dlq",
    "confirm emptying": lambda h: "/dlq/empty",
    "confirm retrying": lambda h: f"/dlq/retry?id={h.dead}",
    "schedules": lambda h: "/schedules",
    "queues": lambda h: "/queues",
    "audit": lambda h: "/audit",
}


@pytest.mark.parametrize("name", PAGES)
def test_a_spoofing_type_reads_as_it_is_on_every_page_naming_it(
    as_operator: Client, history: History, name: str
) -> None:
    response = as_operator.get(PAGES[name](history))
    assert response.status_code == 200
    shown_as_escapes(text(response), name)


def test_the_explanations_naming_a_spoofing_type_show_it_as_escapes(
    as_operator: Client, history: History
) -> None:
    waiting = text(as_operator.get(f"/jobs/{history.waiting}"))
    assert 'data-reason="limit_full"' in waiting
    assert f"the concurrency limit on its type {SHOWN} is full" in waiting
    assert f'<dt>Limit on</dt><dd><a href="/queues#limits">type {SHOWN}</a></dd>' in waiting

    downstream = text(as_operator.get(f"/jobs/{history.downstream}"))
    assert 'data-reason="waiting_for_upstream"' in downstream
    assert f'<span class="list-main">{SHOWN}</span>' in downstream
    assert f"{SHOWN} {short_id(history.dead)}</a>" in downstream  # the alert
    shown_as_escapes(downstream, "downstream job")


def test_the_page_title_and_heading_show_a_spoofing_type_as_escapes(
    as_operator: Client, history: History
) -> None:
    for url in (f"/jobs/{history.running}", f"/dlq/{history.dead}"):
        body = text(as_operator.get(url))
        title = re.search(r"<title>(.*?)</title>", body, re.S)
        heading = re.search(r"<h1>(.*?)</h1>", body, re.S)
        assert title and heading, url
        assert SHOWN in title.group(1) and SHOWN in heading.group(1), url


def test_a_workers_missing_handler_and_the_explanation_show_a_spoofing_type_as_escapes(
    as_operator: Client, history: History
) -> None:
    queues.remove_limit("type", SPOOFED)
    Worker.objects.filter(id=history.worker.id).update(unhandled_types=[SPOOFED])

    waiting = text(as_operator.get(f"/jobs/{history.waiting}"))
    assert 'data-reason="no_handler"' in waiting
    shown_as_escapes(waiting, "no handler")
    shown_as_escapes(text(as_operator.get("/")), "nodes")


def test_a_limit_on_a_spoofing_type_reads_as_it_is_when_removed(as_operator: Client) -> None:
    queues.set_limit("type", SPOOFED, max_running=1)
    removed = as_operator.post(reverse("console:limit-remove", args=["type", SPOOFED]), follow=True)
    assert f"Limit on type {SHOWN} removed." in text(removed)
    shown_as_escapes(text(removed), "queues, after the removal")


def test_a_spoofing_handler_name_reads_as_escapes_in_the_ledgers_filter_and_the_new_job_form(
    as_operator: Client,
) -> None:
    """A handler's name may hold a bidi control too (it only may not hold a C0 control)."""
    registry.register(SPOOFED)(lambda job: None)
    try:
        job = state.enqueue(SPOOFED, {})
        other = state.enqueue("noop", {})
        page = as_operator.get("/jobs", {"type": SPOOFED})
        form = text(as_operator.get("/jobs/new"))
    finally:
        registry.unregister(SPOOFED)
    body = text(page)
    assert f'<option value="{SPOOFED}" selected>{SHOWN}</option>' in body
    shown_as_escapes(body, "ledger filtered by type")
    assert f'<option value="{SPOOFED}">{SHOWN}</option>' in form
    shown_as_escapes(form, "New job form")
    assert [str(j.id) for j in page.context["jobs"]] == [job["id"]]
    assert other["id"] not in body


def test_the_dependency_graph_shows_a_spoofing_type_as_escapes(
    as_operator: Client, history: History
) -> None:
    body = text(as_operator.get(f"/jobs/{history.downstream}"))
    graph = re.search(r'<section class="panel" id="job-graph">.*?</section>', body, re.S)
    assert graph is not None
    shown_as_escapes(graph.group(), "graph")
