"""GET /jobs/{id}/explain and the Job Detail panel: each reason, built for real."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from jobs import state
from jobs.models import Job, Worker

from .conftest import T0, iso


def why(client: APIClient, job_id: Any) -> dict[str, Any]:
    response = client.get(f"/api/v1/jobs/{job_id}/explain")
    assert response.status_code == 200
    return response.json()


def test_a_job_scheduled_for_later_says_when(viewer_client: APIClient, worker: Worker) -> None:
    later = timezone.now() + timedelta(hours=2)
    job = state.enqueue("noop", {}, scheduled_at=later)
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "scheduled"
    assert answer["details"]["run_at"] == job["scheduled_at"]
    assert job["scheduled_at"] in answer["message"]


def test_a_job_waiting_for_upstream_names_them_and_their_states(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    upstream = job_in_state("failed")  # waiting for its retry
    job = state.enqueue("noop", {}, depends_on=uuid.UUID(upstream["id"]))
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "waiting_for_upstream"
    assert answer["details"]["upstream"] == [
        {"id": upstream["id"], "type": "noop", "status": "failed"}
    ]
    assert upstream["id"][:8] in answer["message"]


def test_a_job_waiting_for_its_retry_says_until_when_and_which_attempt(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    job = job_in_state("failed")
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "waiting_for_retry"
    details = answer["details"]
    assert (details["attempt"], details["max_retries"]) == (2, 3)
    assert details["next_retry_at"] == job["next_retry_at"]
    assert "attempt 2 of 3" in answer["message"]


def test_a_due_job_with_no_live_worker_says_so(viewer_client: APIClient) -> None:
    now = timezone.now()
    Worker.objects.create(
        hostname="gone", pid=1, started_at=now, heartbeat_at=now - timedelta(hours=1)
    )
    job = state.enqueue("noop", {})
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "no_live_worker"
    assert answer["details"]["live_workers"] == 0


def test_a_due_job_counts_the_jobs_ahead_and_when_aging_lets_it_overtake(
    viewer_client: APIClient, worker: Worker, job_row: Callable[..., Job]
) -> None:
    low = job_row(priority=3, created_at=T0)  # deadline T0 + 60 min
    job_row(priority=1, created_at=T0 + timedelta(minutes=10))  # T0 + 30: ahead
    job_row(priority=2, created_at=T0 + timedelta(minutes=5))  # T0 + 45: ahead
    job_row(priority=1, created_at=T0 + timedelta(minutes=50))  # T0 + 70: behind
    job_row(priority=1, created_at=T0, status="processing")  # running: not ahead

    answer = why(viewer_client, low.id)
    assert answer["reason"] == "jobs_ahead"
    details = answer["details"]
    assert details["ahead"] == 2
    assert details["virtual_deadline"] == iso(T0 + timedelta(minutes=60))
    assert details["newer_jobs_queue_behind_from"] == {
        "1": iso(T0 + timedelta(minutes=40)),
        "2": iso(T0 + timedelta(minutes=20)),
    }
    assert answer["message"].startswith("It is due; 2 jobs are ahead of it in run order")


def test_running_finished_and_dead_jobs_say_what_they_are(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    reasons = {
        target: why(viewer_client, job_in_state(target)["id"])["reason"]
        for target in ("processing", "completed", "cancelled", "dlq")
    }
    assert reasons == {
        "processing": "running",
        "completed": "completed",
        "cancelled": "cancelled",
        "dlq": "dead_letter",
    }
    assert viewer_client.get(f"/api/v1/jobs/{uuid.uuid4()}/explain").status_code == 404


def test_job_detail_shows_the_reason_panel(viewer: Any, worker: Worker) -> None:
    job = state.enqueue("noop", {}, scheduled_at=timezone.now() + timedelta(hours=1))
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/jobs/{job['id']}").content.decode()
    assert 'id="explain" data-reason="scheduled"' in page
    assert "It is scheduled for" in page
