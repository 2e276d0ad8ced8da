"""The DLQ's "whole queue" actions and its lists as an operator goes through them: "Retry
all" and "Empty the DLQ" act on what their confirmation page counted, the bulk links keep
one scope however often the operator comes back, and a bad page number is the first page."""

from __future__ import annotations

import html
import re
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from jobs import state
from jobs.models import AuditEntry, Job, JobStatus, UserPreference

from .helpers import dead_letter, text

pytestmark = pytest.mark.django_db


def hidden_fields(page: Any) -> dict[str, str]:
    """What the page's confirmation form sends, as a browser would."""
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', text(page))
    return {name: html.unescape(value) for name, value in found}


def dlq_ids() -> set[uuid.UUID]:
    return set(Job.objects.filter(in_dlq=True).values_list("id", flat=True))


# Dead letters that arrive while the page is open enter the DLQ after it was shown: the
# statement that puts them there must read the real time, not a test transaction's start.
@pytest.mark.django_db(transaction=True)
def test_emptying_the_dlq_purges_what_the_page_counted_not_what_arrived_since(
    as_operator: Client,
) -> None:
    counted = {uuid.UUID(dead_letter()["id"]) for _ in range(3)}
    confirm = as_operator.get("/dlq/empty")
    assert "<strong>3</strong> jobs" in text(confirm)
    newer = {uuid.UUID(dead_letter()["id"]) for _ in range(2)}

    response = as_operator.post("/dlq/empty", hidden_fields(confirm), follow=True)

    body = text(response)
    assert "3 job(s) purged" in body
    assert "2 newer dead letter(s), which arrived after the confirmation page, were left" in body
    assert dlq_ids() == newer
    assert not Job.objects.filter(id__in=counted).exists()
    entry = AuditEntry.objects.get(action="empty_dlq")
    assert (entry.target, entry.count) == ("3 jobs", 3)


@pytest.mark.django_db(transaction=True)
def test_retry_all_retries_what_the_page_counted_not_what_arrived_since(
    as_operator: Client,
) -> None:
    counted = {uuid.UUID(dead_letter()["id"]) for _ in range(3)}
    confirm = as_operator.get("/dlq/retry", {"all": "1"})
    assert "<strong>3</strong> jobs" in text(confirm)
    newer = {uuid.UUID(dead_letter()["id"]) for _ in range(2)}

    response = as_operator.post("/dlq/retry", hidden_fields(confirm), follow=True)

    body = text(response)
    assert "3 job(s) back to pending." in body
    assert "2 newer dead letter(s), which arrived after the confirmation page, were left" in body
    assert dlq_ids() == newer
    assert {job.status for job in Job.objects.filter(id__in=counted)} == {JobStatus.PENDING}


def test_the_whole_dlq_is_acted_on_only_from_its_confirmation_page(as_operator: Client) -> None:
    # A form without the page's moment (a page from before this rule, a hand-made request)
    # cannot say what was counted: it is sent to the confirmation page, nothing is done.
    dead_letter(), dead_letter()
    for path, confirmation in (("/dlq/empty", "/dlq/empty"), ("/dlq/retry", "/dlq/retry?all=1")):
        response = as_operator.post(path, {"all": "1"})
        assert response.status_code == 302 and response["Location"] == confirmation
        assert len(dlq_ids()) == 2
    page = as_operator.get("/dlq/empty")
    assert "Nothing was done" in text(page)


def test_a_message_says_nothing_was_left_when_nothing_arrived(as_operator: Client) -> None:
    dead_letter(), dead_letter()
    confirm = as_operator.get("/dlq/empty")
    body = text(as_operator.post("/dlq/empty", hidden_fields(confirm), follow=True))
    assert "Dead-letter queue emptied: 2 job(s) purged." in body and "newer" not in body
    assert not dlq_ids()


def link(page: Any, label: str) -> str:
    """The href of the page's button link whose text matches `label` (a regular expression)."""
    for href, shown in re.findall(r'<a class="btn[^"]*" href="([^"]+)">([^<]+)</a>', text(page)):
        if re.fullmatch(label, shown):
            return html.unescape(href)
    raise AssertionError(f"no link {label!r}")


def test_the_dlqs_bulk_links_keep_one_scope_however_often_the_operator_comes_back(
    as_operator: Client,
) -> None:
    dead_letter(error="smtp refused")
    page = as_operator.get("/dlq", {"q": "smtp", "page": "1"})
    for _ in range(3):
        confirm = as_operator.get(link(page, "Retry all .*matching…"))
        assert confirm.context["count"] == 1
        page = as_operator.get(link(confirm, "Back"))
        assert page.status_code == 200
    for label in ("Retry all .*matching…", "Purge all .*matching…"):
        query = parse_qs(urlsplit(link(page, label)).query)
        assert query == {"scope": ["dlq"], "q": ["smtp"]}


@pytest.mark.parametrize(("path", "pages"), [("/jobs", 3), ("/dlq", 2)])
@pytest.mark.parametrize("number", ["-1", "0", "two"])
def test_a_page_number_that_is_no_page_shows_the_first_page(
    as_operator: Client, operator: Any, path: str, pages: int, number: str
) -> None:
    UserPreference.objects.create(user=operator, page_size=1)
    dead_letter(), dead_letter()
    state.enqueue("noop", {}, priority=2)
    assert f"Page 1 of {pages}" in text(as_operator.get(path, {"page": number}))
    # Past the last page is the last page, as Django's `get_page` has it.
    assert f"Page {pages} of {pages}" in text(as_operator.get(path, {"page": "99"}))
