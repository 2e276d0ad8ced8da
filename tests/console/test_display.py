"""What the console shows of a job's state and data: the buttons each display state offers
come from the one table in jobs/display.py, the page hands that table to console.js, and a
payload of any shape is shown in bounded size with the raw JSON one download away."""

from __future__ import annotations

import html
import json
import re
import uuid
from typing import Any

import pytest
from django.test import Client

from jobs import state
from jobs.display import SHOWN_JSON_CHARS, STATES, Action, table_for_script
from jobs.models import Job

from .helpers import NEW_JOB_IN

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}

# What each action looks like on a job's page and in its ledger row.
PAGE_FORM = {action: f'action="/jobs/{{id}}/{action}"' for action in Action}


def nested(depth: int) -> list[Any]:
    """[[[...]]] `depth` lists deep: 2 bytes a level."""
    value: list[Any] = ["bottom"]
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("name", list(STATES))
def test_a_job_page_and_its_row_offer_the_actions_of_its_display_state(
    as_operator: Client, name: str
) -> None:
    job = NEW_JOB_IN[name]()
    page = as_operator.get(f"/jobs/{job['id']}", follow=True).content.decode()
    row = as_operator.get(f"/jobs/{job['id']}/row", **HTMX).content.decode()
    assert f'class="pill pill-{name}">{STATES[name].label}<' in page
    for action in Action:
        form = PAGE_FORM[action].format(id=job["id"])
        assert (form in page) is STATES[name].allows(action), (name, action)
        # The ledger row has no purge button: purging is done from the DLQ page.
        if action != Action.PURGE:
            assert (form in row) is STATES[name].allows(action), (name, action)


def test_every_page_hands_the_display_table_to_console_js(as_operator: Client) -> None:
    page = as_operator.get("/").content.decode()
    found = re.search(
        r'<script id="display-states" type="application/json">(.*?)</script>', page, re.S
    )
    assert found is not None
    table = json.loads(found.group(1))
    assert table == table_for_script()
    assert table["blocked"]["label"] == "Blocked"
    assert table["dlq"]["actions"] == ["retry", "purge"]


def test_a_deeply_nested_payload_renders_a_small_page_with_the_raw_json_to_download(
    as_operator: Client,
) -> None:
    # About 1 KB of JSON; pretty-printed in full it was 500 KB, nearly all indentation.
    payload = {"tree": nested(500)}
    assert len(json.dumps(payload)) < 1100
    # The API refuses such a payload now (jobs.limits), but a job stored before may hold one.
    job = state.enqueue("noop", {}, priority=2)
    Job.objects.filter(id=job["id"]).update(payload=payload)

    response = as_operator.get(f"/jobs/{job['id']}")
    page = response.content.decode()
    assert response.status_code == 200
    assert len(response.content) < 40_000
    assert "truncated" in page and "Download the raw JSON" in page
    assert "&quot;bottom&quot;" not in page  # below the shown depth

    raw = as_operator.get(f"/jobs/{job['id']}/payload.json")
    assert raw.status_code == 200
    assert raw["Content-Type"] == "application/json"
    assert f"job-{job['id']}-payload.json" in raw["Content-Disposition"]
    assert json.loads(raw.content) == payload


def test_a_long_payload_is_cut_at_the_size_bound(as_operator: Client) -> None:
    payload = {"rows": [f"row {i:06d}" for i in range(20_000)]}
    job = state.enqueue("noop", payload, priority=2)
    response = as_operator.get(f"/jobs/{job['id']}")
    page = response.content.decode()
    assert "Download the raw JSON" in page
    assert "&quot;row 000000&quot;" in page and "row 019999" not in page
    shown = re.search(r'<pre class="code">(.*?)</pre>', page, re.S)
    assert shown is not None and len(html.unescape(shown.group(1))) <= SHOWN_JSON_CHARS + 2


def test_an_ordinary_payload_and_result_are_shown_whole(as_operator: Client) -> None:
    done = NEW_JOB_IN["completed"]()  # result {"ok": true}
    job = state.enqueue("noop", {"to": "ops@example.com", "n": [1, 2]}, priority=2)
    page = as_operator.get(f"/jobs/{job['id']}").content.decode()
    assert json.dumps(job["payload"], indent=2, sort_keys=True).replace('"', "&quot;") in page
    assert "truncated" not in page
    finished = as_operator.get(f"/jobs/{done['id']}").content.decode()
    assert "&quot;ok&quot;: true" in finished and "truncated" not in finished
    raw = as_operator.get(f"/jobs/{done['id']}/result.json")
    assert json.loads(raw.content) == {"ok": True}


def test_raw_json_of_a_missing_job_is_a_404(as_operator: Client) -> None:
    job = state.enqueue("noop", {}, priority=2)
    assert as_operator.get(f"/jobs/{uuid.uuid4()}/payload.json").status_code == 404
    assert as_operator.get(f"/jobs/{job['id']}/result.json").status_code == 404
