"""The ledger refuses a filter given more than once, as the API does: Django hands a view the
last of several values, so `/jobs?status=pending&status=failed` listed only the retrying jobs,
said they "match these filters" and offered to cancel them all. The ledger shows the message
next to the field, as it shows a filter value that is not valid, and lists nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from jobs import state
from jobs.models import UserPreference
from jobs.representation import short_id

from .helpers import failed_once, text

pytestmark = pytest.mark.django_db

REPEATED = "Given more than once: send one value."


def field(body: str, name: str) -> str:
    """The ledger form's field named `name`: its control and the errors under it."""
    start = body.index(f'name="{name}"')
    return body[start : body.index("</label>", start)]


def test_two_statuses_are_refused_next_to_the_field_and_list_nothing(as_operator: Client) -> None:
    pending = state.enqueue("noop", {}, priority=2)
    retrying = failed_once(max_retries=3)
    response = as_operator.get("/jobs?status=pending&status=failed")
    assert response.status_code == 200
    body = text(response)
    assert REPEATED in field(body, "status")
    assert "Some filters are not valid; fix them above." in body
    assert short_id(pending["id"]) not in body and short_id(retrying["id"]) not in body
    assert "No job matches." in body
    assert "matching…" not in body


def test_every_repeated_filter_is_shown_at_its_own_field(as_viewer: Client) -> None:
    state.enqueue("noop", {}, priority=1)
    query = (
        "priority=1&priority=3&type=noop&type=noop&queue=default&ordering=priority"
        "&ordering=-priority&created_after=2026-01-01T00:00&created_after=2026-02-01T00:00"
    )
    body = text(as_viewer.get(f"/jobs?{query}"))
    for name in ("priority", "type", "ordering"):
        assert REPEATED in field(body, name), name
    assert REPEATED not in field(body, "queue")
    assert f"created_after: {REPEATED}" in body
    assert "created_before:" not in body
    assert "No job matches." in body


def test_a_repeated_filter_is_named_even_when_its_last_value_is_not_valid(
    as_viewer: Client,
) -> None:
    body = text(as_viewer.get("/jobs?priority=1&priority=7"))
    assert REPEATED in field(body, "priority")


def test_a_repeated_page_shows_the_first_page_as_any_page_that_is_not_one_number(
    as_viewer: Client, viewer: Any
) -> None:
    # The pager replaces `page`, never repeats it; by hand, `page=2&page=3` is no one page,
    # as `page=x` is not: the first page, as for that.
    UserPreference.objects.create(user=viewer, page_size=10)
    for _ in range(12):
        state.enqueue("noop", {}, priority=2)
    for query in ("page=2&page=2", "page=x", "page=1&page=2"):
        body = text(as_viewer.get(f"/jobs?{query}"))
        assert "Page 1 of 2" in body and body.count('id="job-') == 10, query
        assert REPEATED not in body
    assert "Page 2 of 2" in text(as_viewer.get("/jobs?page=2"))


def test_the_form_sends_each_field_once_and_so_still_lists(as_viewer: Client) -> None:
    # Without JavaScript the form sends every field, empty ones too: each must be one field.
    job = state.enqueue("noop", {}, priority=2)
    page = text(as_viewer.get("/jobs"))
    start = page.index('id="ledger-filters"')
    form = page[start : page.index("</form>", start)]
    names = re.findall(r'name="([^"]+)"', form)
    assert len(names) == len(set(names)) and "status" in names
    sent = dict.fromkeys(names, "") | {"status": "pending"}
    response = as_viewer.get("/jobs", sent)
    body = text(response)
    assert short_id(job["id"]) in body
    assert REPEATED not in body and "not valid" not in body
