"""What the DLQ pages say, as an operator reads them: the charts' bars and labels, the
heading of a narrowed list, its search, and a dead letter's page with a long error."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from jobs import bulk
from jobs.models import Job, JobStatus

from .helpers import dead_letter

pytestmark = pytest.mark.django_db


def chart_bars(body: str, title: str) -> list[str]:
    """The bars of the chart titled `title`, as their tooltips say them ("label: count")."""
    (chart,) = re.findall(rf'<svg [^>]*aria-label="{title}".*?</svg>', body, re.S)
    return re.findall(r'<g class="chart-row"><title>(.*?)</title>', chart)


def test_the_by_error_chart_counts_an_error_whose_message_varies_as_one(
    as_viewer: Client,
) -> None:
    for seconds in (10, 20, 30):
        dead_letter("flaky", error=f"timeout after {seconds} s on 'shard-{seconds}'")
    dead_letter("noop", error="timeout after 40 s on 'shard-40'")
    for _ in range(2):
        dead_letter("noop", error="bad input")

    bars = chart_bars(as_viewer.get("/dlq").content.decode(), "Dead letters by error")
    # Each message was a bar of its own: the error four of the six dead letters died of
    # was four bars of 1, each below "bad input" (and, past 8 bars, off the chart).
    assert bars == ["HandlerFailure: timeout after N s on ?: 4", "bad input: 2"]


def test_a_dead_letters_page_opens_on_its_actions_whatever_the_length_of_its_error(
    as_operator: Client,
) -> None:
    # As long as a worker stores one (`worker.outcome.ERROR_MESSAGE_LIMIT`).
    message = "upstream said: " + "no such row; " * 306
    dead = dead_letter("flaky", error=message)
    body = as_operator.get(f"/dlq/{dead['id']}").content.decode()

    head = body[body.index('<div class="page-head">') : body.index('id="retry-button"')]
    # The whole message stood above the buttons: 35 lines at 1280 px, 100 on a phone.
    shown = re.search(r'<p class="error-text">(.*?)</p>', head, re.S)
    assert shown is not None and len(re.sub(r"<[^>]+>", "", shown[1])) < 300
    assert 'href="#attempts"' in head
    attempts = body[body.index('id="attempts"') :]
    assert message.strip() in attempts


def heading(body: str) -> str:
    """What the DLQ page says under its title, its markup and spacing left out."""
    start = body.index("<h1>Dead-letter queue</h1>")
    head = body[start : body.index("</div>", start)]
    return " ".join(re.sub(r"<[^>]+>", " ", head).split())


def test_a_narrowed_dlq_says_how_many_of_its_dead_letters_match(as_viewer: Client) -> None:
    for _ in range(3):
        dead_letter("flaky", error="timeout")
    dead_letter("noop", error="bad input")

    assert heading(as_viewer.get("/dlq").content.decode()) == (
        "Dead-letter queue 4 jobs used every attempt. Investigate, then retry or purge."
    )
    # Narrowed, it said "1 job used every attempt" of a queue of four, as if that were all
    # of it, and of a search that found nothing "0 jobs used every attempt".
    assert heading(as_viewer.get("/dlq", {"q": "bad input"}).content.decode()) == (
        "Dead-letter queue 1 job used every attempt and matches, of the 4 in the queue. "
        "Investigate, then retry or purge."
    )
    signature = "flaky · HandlerFailure: timeout"
    assert heading(as_viewer.get("/dlq", {"signature": signature}).content.decode()) == (
        "Dead-letter queue 3 jobs used every attempt and match, of the 4 in the queue. "
        "Investigate, then retry or purge."
    )
    assert heading(as_viewer.get("/dlq", {"q": "no such error"}).content.decode()) == (
        "Dead-letter queue 0 jobs used every attempt and match, of the 4 in the queue. "
        "Investigate, then retry or purge."
    )


def test_the_dlq_search_finds_a_dead_letter_by_the_short_id_its_table_shows(
    as_operator: Client,
) -> None:
    wanted, other = dead_letter("flaky", error="boom"), dead_letter("flaky", error="boom")
    body = as_operator.get("/dlq").content.decode()
    shown = re.search(rf'<a class="mono" href="/dlq/{wanted["id"]}">([^<]+)</a>', body)
    assert shown is not None

    # It found nothing: only a whole id was taken for an id.
    for typed in (shown[1], shown[1].upper(), wanted["id"][-12:]):
        found = as_operator.get("/dlq", {"q": typed})
        assert [str(job.id) for job in found.context["jobs"]] == [wanted["id"]], typed
    assert heading(found.content.decode()).startswith("Dead-letter queue 1 job used every")

    # "Retry all matching" takes what the search lists, and only that.
    confirm = as_operator.get("/bulk/retry", {"scope": "dlq", "q": shown[1]})
    assert confirm.context["count"] == 1
    form = {**dict(confirm.context["hidden"]), "as_of": confirm.context["as_of"], "confirmed": "1"}
    as_operator.post("/bulk/retry", form)
    runner = Job.objects.get(type=bulk.BULK_TYPE)
    assert bulk.run(runner.payload, lambda *p: None, job_id=runner.id) == {
        "matched": 1,
        "retried": 1,
    }
    assert Job.objects.get(id=wanted["id"]).status == JobStatus.PENDING
    assert Job.objects.get(id=other["id"]).in_dlq
