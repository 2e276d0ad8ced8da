"""The console's workflow pages: Schedules (each schedule with its next 5 runs on its own
clock, an operator's pause and resume) and Job Detail's dependency graph."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from jobs import queues, state
from jobs.models import Job
from jobs.representation import short_id

pytestmark = pytest.mark.django_db


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_schedules_list_their_next_runs_and_an_operator_pauses_and_resumes(operator, viewer):
    run = state.enqueue("noop", {}, cron="30 2 * * *", timezone="Europe/Berlin")
    row = f'id="schedule-{run["schedule_id"]}"'

    seen = login(viewer).get("/schedules").content.decode()
    assert row in seen and "30 2 * * *" in seen and "Europe/Berlin" in seen
    assert seen.count(" 02:30 CE") == 5  # CET or CEST, on Berlin's clock
    assert "Pause</button>" not in seen
    assert login(viewer).post(f"/schedules/{run['schedule_id']}/pause").status_code == 403

    operator_client = login(operator)
    response = operator_client.post(f"/schedules/{run['schedule_id']}/pause", follow=True)
    page = response.content.decode()
    assert "Schedule paused." in page and "none while paused" in page
    assert "Resume</button>" in page
    assert Job.objects.get(id=run["id"]).status == "cancelled"

    resumed = operator_client.post(f"/schedules/{run['schedule_id']}/resume", follow=True)
    assert "Schedule resumed." in resumed.content.decode()
    assert Job.objects.filter(schedule_id=run["schedule_id"], status="pending").count() == 1

    assert login(viewer).post(f"/schedules/{run['schedule_id']}/delete").status_code == 403
    deleted = operator_client.post(f"/schedules/{run['schedule_id']}/delete", follow=True)
    body = deleted.content.decode()
    assert "Schedule deleted" in body and row not in body
    assert not Job.objects.filter(status="pending").exists()


def test_the_new_job_form_creates_a_schedule_and_names_a_bad_expression(operator):
    client = login(operator)
    form = {"type": "noop", "payload": "{}", "priority": "2", "timezone": "Asia/Tokyo"}
    refused = client.post("/jobs/new", {**form, "cron": "daily"})
    assert refused.status_code == 400
    assert "Must have 5 fields" in refused.content.decode()
    created = client.post("/jobs/new", {**form, "cron": "0 9 * * 1-5"})
    assert created.status_code == 302
    (run,) = Job.objects.filter(schedule__isnull=False)
    assert run.schedule is not None
    assert (run.schedule.cron, run.schedule.timezone) == ("0 9 * * 1-5", "Asia/Tokyo")
    assert created["Location"] == f"/jobs/{run.id}"


def test_job_detail_draws_the_dependency_graph_and_says_what_a_dead_letter_holds_up(operator):
    client = login(operator)
    root = state.enqueue("noop", {})
    middle = [state.enqueue("noop", {}, depends_on=uuid.UUID(root["id"])) for _ in range(3)]
    join = state.enqueue("noop", {}, depends_on=[uuid.UUID(m["id"]) for m in middle])
    Job.objects.filter(id=middle[0]["id"]).update(status="failed", in_dlq=True)

    page = client.get(f"/jobs/{join['id']}").content.decode()
    start = page.index('<svg class="job-graph"')
    svg = page[start : page.index("</svg>", start)]
    assert svg.count('class="graph-node"') == 4
    assert svg.count('class="graph-node current"') == 1  # this page's job, outlined
    assert svg.count("<line ") == 6
    assert f'href="/jobs/{root["id"]}"' in svg
    assert 'data-state="dlq"' in svg and 'data-state="blocked"' in svg
    assert 'id="waiting-on-dlq"' in page and short_id(middle[0]["id"]) in page
    # A job with no dependency has no graph to draw.
    alone = state.enqueue("noop", {})
    assert "job-graph" not in client.get(f"/jobs/{alone['id']}").content.decode()


def test_job_detail_draws_an_upstream_job_of_a_paused_queue_as_paused(viewer):
    queues.pause("reports")
    upstream = state.enqueue("noop", {}, queue="reports")
    job = state.enqueue("noop", {}, depends_on=uuid.UUID(upstream["id"]))

    page = login(viewer).get(f"/jobs/{job['id']}").content.decode()
    start = page.index('<svg class="job-graph"')
    svg = page[start : page.index("</svg>", start)]
    assert f'data-state="paused"><title>noop {upstream["id"]}: Paused</title>' in svg
    assert f"{short_id(upstream['id'])} · Paused</text>" in svg
