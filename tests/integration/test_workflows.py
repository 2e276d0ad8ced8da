"""Workflows on a real `runworker`: a fan-out/fan-in (1 -> 50 -> 1) runs every job once and
the join only after all 50, and a cron schedule whose slot passed while no worker ran runs
once and carries on from its next slot."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt

from .conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_fan_out_fan_in_and_a_missed_cron_slot_on_one_worker(start_worker):
    root = state.enqueue("noop", {})
    middle = [state.enqueue("noop", {}, depends_on=uuid.UUID(root["id"])) for _ in range(50)]
    join = state.enqueue("noop", {}, depends_on=[uuid.UUID(m["id"]) for m in middle])
    # A yearly schedule's waiting run whose slot passed ten minutes ago, as after an outage.
    missed = state.enqueue("noop", {}, cron="0 0 1 1 *")
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    Job.objects.filter(id=missed["id"]).update(scheduled_at=ten_minutes_ago, run_at=ten_minutes_ago)

    start_worker("--concurrency", "8")
    wait_for(lambda: Job.objects.get(id=join["id"]).status == "completed", timeout=200)

    flow = Job.objects.filter(id__in=[root["id"], join["id"], *(m["id"] for m in middle)])
    assert flow.count() == 52 and set(flow.values_list("status", flat=True)) == {"completed"}
    assert JobAttempt.objects.filter(job__in=flow).count() == 52  # each ran once
    fanned = Job.objects.filter(id__in=[m["id"] for m in middle])
    first_start = min(fanned.values_list("started_at", flat=True))
    last_finish = max(fanned.values_list("completed_at", flat=True))
    assert first_start >= Job.objects.get(id=root["id"]).completed_at
    assert Job.objects.get(id=join["id"]).started_at >= last_finish

    def next_run() -> Job | None:
        return Job.objects.filter(schedule_id=missed["schedule_id"], status="pending").first()

    upcoming = wait_for(next_run, timeout=60)
    ran = Job.objects.get(id=missed["id"])
    assert ran.status == "completed"
    assert Job.objects.filter(schedule_id=missed["schedule_id"]).count() == 2  # nothing caught up
    assert upcoming.scheduled_at == datetime(ran.completed_at.year + 1, 1, 1, tzinfo=UTC)
