"""A job page's "Why isn't it running?" section: its times are shown as everywhere else in
the console (`when`: in the viewer's time zone, the full time in a title), not as the API's
UTC text, and its jobs by the short id the rest of the console names them by."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from jobs import queues, state
from jobs.console.templatetags.console import when
from jobs.models import Job, Queue, UserPreference
from jobs.representation import format_time, short_id
from jobs.scheduling import PRIORITY_WEIGHT

from .helpers import make_worker, text

pytestmark = pytest.mark.django_db

TOKYO = "Asia/Tokyo"


def explain_section(client: Client, job: dict[str, Any]) -> str:
    page = text(client.get(f"/jobs/{job['id']}"))
    found = re.search(r'<section class="panel explain".*?</section>', page, re.S)
    assert found, page
    return found.group()


def shown_in_tokyo(at: datetime) -> str:
    """`when` of a time as the explanation gives it: to the millisecond."""
    with timezone.override(ZoneInfo(TOKYO)):
        return str(when(at.replace(microsecond=at.microsecond // 1000 * 1000)))


@pytest.fixture
def in_tokyo(as_viewer: Client, viewer: Any) -> Client:
    UserPreference.objects.create(user=viewer, time_zone=TOKYO)
    return as_viewer


def test_a_paused_queue_says_since_when_in_the_viewers_time_zone(in_tokyo: Client) -> None:
    queues.pause("reports")
    job = state.enqueue("noop", {}, queue="reports")
    paused_at = Queue.objects.get(name="reports").updated_at

    section = explain_section(in_tokyo, job)

    since = shown_in_tokyo(paused_at)
    assert f"<dt>Paused since</dt><dd>{since}</dd>" in section
    assert f"Its queue reports is paused since {since}: none" in section
    assert format_time(paused_at) not in section


def test_the_moments_newer_jobs_stop_overtaking_are_in_the_viewers_time_zone(
    in_tokyo: Client,
) -> None:
    make_worker()
    job = state.enqueue("noop", {}, priority=3)

    section = explain_section(in_tokyo, job)

    assert 'data-reason="jobs_ahead"' in section
    deadline = Job.objects.get(id=job["id"]).virtual_deadline
    assert f"(virtual deadline)</dt><dd>{shown_in_tokyo(deadline)}</dd>" in section
    for priority in (1, 2):
        at = deadline - priority * PRIORITY_WEIGHT
        shown = shown_in_tokyo(at)
        assert f"queue behind it from</dt><dd>{shown}</dd>" in section, priority
        assert f"{shown} (priority {priority})" in section, priority
        assert format_time(at) not in section


def test_a_scheduled_job_says_for_when_in_the_viewers_time_zone(in_tokyo: Client) -> None:
    later = timezone.now() + timedelta(hours=5)
    job = state.enqueue("noop", {}, scheduled_at=later)

    section = explain_section(in_tokyo, job)

    assert f"It is scheduled for {shown_in_tokyo(later)}." in section


def test_the_upstream_jobs_waited_for_are_named_by_their_short_id(as_viewer: Client) -> None:
    upstream = [state.enqueue("noop", {}) for _ in range(2)]
    job = state.enqueue("noop", {}, depends_on=[uuid.UUID(up["id"]) for up in upstream])

    section = explain_section(as_viewer, job)

    for up in upstream:
        assert f'<a class="mono" href="/jobs/{up["id"]}">{short_id(up["id"])}</a>' in section
