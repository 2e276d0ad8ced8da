"""GET /jobs/{id}/explain and the Job Detail panel: each reason, built for real."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from jobs import queues, state
from jobs.models import Job, Worker
from jobs.representation import short_id

from .conftest import T0, claim_one, iso

HOUR = timedelta(hours=1)


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
        {"id": upstream["id"], "type": "noop", "status": "failed", "display_state": "retrying"}
    ]
    assert f"noop {short_id(upstream['id'])} (retrying)" in answer["message"]
    assert answer["details"]["dead_letters"] == []


def test_a_fan_in_names_a_few_upstream_jobs_in_its_sentence_and_all_in_details(
    viewer_client: APIClient,
) -> None:
    # A fan-in of 1,000 pending upstream jobs made the sentence 110 kB.
    upstream = state.enqueue_many([state.JobSpec("noop", {"n": n}) for n in range(40)])
    job = state.enqueue("noop", {}, depends_on=[uuid.UUID(u["id"]) for u in upstream])
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "waiting_for_upstream"
    assert len(answer["details"]["upstream"]) == 40
    message = answer["message"]
    assert message.startswith("It waits for 40 upstream jobs to complete: ")
    assert message.endswith(" and 35 more (details.upstream lists them).")
    assert sum(short_id(u["id"]) in message for u in upstream) == 5


def test_a_job_steps_below_a_dead_letter_names_it_through_the_blocked_chain(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    dead = job_in_state("dlq")
    middle = state.enqueue("noop", {}, depends_on=uuid.UUID(dead["id"]))
    job = state.enqueue("noop", {}, depends_on=uuid.UUID(middle["id"]))
    elsewhere = state.enqueue("noop", {})  # pending, held by nothing
    join = state.enqueue("noop", {}, depends_on=[uuid.UUID(job["id"]), uuid.UUID(elsewhere["id"])])

    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "waiting_for_upstream"
    # Its upstream job is shown as the console's pill shows it, not as a stored status.
    assert answer["details"]["upstream"] == [
        {"id": middle["id"], "type": "noop", "status": "pending", "display_state": "blocked"}
    ]
    assert answer["details"]["dead_letters"] == [{"id": dead["id"], "type": "noop"}]
    assert answer["details"]["dead_letters_truncated"] is False
    assert answer["message"] == (
        f"It waits for 1 upstream job to complete: noop {short_id(middle['id'])} (blocked); "
        "it is held up until the dead letter upstream is retried and completes: "
        f"noop {short_id(dead['id'])}."
    )
    three_down = why(viewer_client, join["id"])["details"]
    assert three_down["dead_letters"] == [{"id": dead["id"], "type": "noop"}]
    assert why(viewer_client, middle["id"])["details"]["dead_letters"] == [
        {"id": dead["id"], "type": "noop"}
    ]

    state.retry_from_dlq(uuid.UUID(dead["id"]))
    answer = why(viewer_client, job["id"])
    assert answer["details"]["dead_letters"] == []
    assert "dead letter" not in answer["message"]


def test_the_walk_up_to_dead_letters_is_bounded_and_says_when_it_stopped(
    viewer_client: APIClient,
) -> None:
    # A fan-in of the most upstream jobs a job may name, one step above: one more unfinished
    # upstream job than the walk reads.
    upstream = state.enqueue_many([state.JobSpec("noop", {"n": n}) for n in range(1000)])
    fan_in = state.enqueue("noop", {}, depends_on=[uuid.UUID(u["id"]) for u in upstream])
    job = state.enqueue("noop", {}, depends_on=uuid.UUID(fan_in["id"]))
    details = why(viewer_client, job["id"])["details"]
    assert (details["dead_letters"], details["dead_letters_truncated"]) == ([], True)
    assert why(viewer_client, fan_in["id"])["details"]["dead_letters_truncated"] is False


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


def test_a_job_of_a_paused_queue_says_since_when_and_by_whom(
    viewer_client: APIClient, operator_client: APIClient, operator: Any, worker: Worker
) -> None:
    job = state.enqueue("noop", {}, queue="emails")
    state.enqueue("noop", {}, queue="emails")
    paused = operator_client.post("/api/v1/queues/emails/pause").json()
    operator_client.post("/api/v1/queues/emails/pause")  # again: still paused since the first
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "queue_paused"
    assert answer["details"] == {
        "queue": "emails",
        "paused_since": paused["changed_at"],
        "paused_by": operator.username,
        "pending_in_queue": 2,
    }
    assert answer["message"] == (
        f"Its queue emails is paused since {paused['changed_at']} (by {operator.username}): "
        "none of its 2 pending jobs starts until an operator resumes it."
    )
    # Paused by no one in a request (a command, a script): who is not known.
    queues.resume("emails")
    queues.pause("emails")
    assert why(viewer_client, job["id"])["details"]["paused_by"] is None
    queues.resume("emails")
    assert why(viewer_client, job["id"])["reason"] == "jobs_ahead"


def test_a_due_job_whose_queue_no_live_worker_serves_says_what_they_serve(
    viewer_client: APIClient,
) -> None:
    now = timezone.now()
    for queues_, other in ((["reports"], []), (None, ["emails"])):
        Worker.objects.create(
            hostname="live",
            pid=1,
            started_at=now,
            heartbeat_at=now,
            queues=queues_,
            other_queues=other,
        )
    Worker.objects.create(hostname="gone", pid=2, started_at=now, heartbeat_at=now - HOUR)
    job = state.enqueue("noop", {}, queue="emails")
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "no_live_worker"
    assert answer["details"] == {
        "queue": "emails",
        "live_workers": 2,
        "served_by_live_workers": ["all -emails", "reports"],
    }
    assert "none of the 2 live workers serves its queue emails" in answer["message"]
    assert "runworker --queues emails" in answer["message"]
    # A job of a queue they serve is not held back by them.
    served = state.enqueue("noop", {}, queue="reports")
    assert why(viewer_client, served["id"])["reason"] == "jobs_ahead"


def test_a_due_job_whose_type_no_serving_worker_has_a_handler_for_says_so(
    viewer_client: APIClient,
) -> None:
    now = timezone.now()
    for unhandled in (["noop"], ["noop", "other"]):
        Worker.objects.create(
            hostname="old", pid=1, started_at=now, heartbeat_at=now, unhandled_types=unhandled
        )
    # A worker that has the handler but serves another queue does not count.
    Worker.objects.create(hostname="new", pid=2, started_at=now, heartbeat_at=now, queues=["x"])
    job = state.enqueue("noop", {})
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "no_handler"
    assert answer["details"] == {"type": "noop", "queue": "default", "workers_without_handler": 2}
    assert answer["message"].startswith(
        "It is due, but the 2 live workers serving its queue default have no handler for its "
        "type noop"
    )
    # Once one serving worker has it, the job only waits its turn.
    Worker.objects.create(hostname="new", pid=3, started_at=now, heartbeat_at=now)
    assert why(viewer_client, job["id"])["reason"] == "jobs_ahead"


def test_a_due_job_under_a_full_concurrency_limit_names_it_and_its_use(
    viewer_client: APIClient, worker: Worker
) -> None:
    queues.set_limit("queue", "emails", max_running=1)
    claim_one(worker, state.enqueue("noop", {}, queue="emails")["id"])
    job = state.enqueue("noop", {}, queue="emails")
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "limit_full"
    details = answer["details"]
    assert (details["scope"], details["name"], details["full"]) == (
        "queue",
        "emails",
        "max_running",
    )
    assert (details["running"], details["max_running"]) == (1, 1)
    assert "concurrency limit on its queue emails is full: 1 of 1 running" in answer["message"]
    # With room again (a higher limit), it waits only for the jobs ahead.
    queues.set_limit("queue", "emails", max_running=2)
    assert why(viewer_client, job["id"])["reason"] == "jobs_ahead"


def test_a_due_job_under_a_full_rate_limit_names_it_and_its_use(
    viewer_client: APIClient, worker: Worker
) -> None:
    queues.set_limit("type", "noop", max_starts=1, period_seconds=3600)
    claim_one(worker, state.enqueue("noop", {})["id"])
    job = state.enqueue("noop", {})
    answer = why(viewer_client, job["id"])
    assert answer["reason"] == "limit_full"
    details = answer["details"]
    assert (details["scope"], details["name"], details["full"]) == ("type", "noop", "max_starts")
    assert (details["recent_starts"], details["max_starts"], details["period_seconds"]) == (
        1,
        1,
        3600,
    )
    assert (
        "rate limit on its type noop is full: 1 of 1 starts in the last 3600 s"
        in (answer["message"])
    )


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


def test_the_jobs_ahead_are_those_the_workers_able_to_take_it_would_claim_first(
    viewer_client: APIClient, job_row: Callable[..., Job]
) -> None:
    now = timezone.now()
    # A worker beside its lane for `webhooks` (`runworker --queue webhooks=2`).
    for only, other in ((None, ["webhooks"]), (["webhooks"], [])):
        Worker.objects.create(
            hostname="h", pid=1, started_at=now, heartbeat_at=now, queues=only, other_queues=other
        )
    low = job_row(priority=3, created_at=T0)
    job_row(priority=1, created_at=T0)  # ahead
    for _ in range(3):
        job_row(priority=1, created_at=T0, queue="webhooks")  # the lane's
    job_row(priority=1, created_at=T0, queue="reports")  # ahead until its queue is paused

    assert why(viewer_client, low.id)["details"]["ahead"] == 2
    queues.pause("reports")
    assert why(viewer_client, low.id)["details"]["ahead"] == 1
    # A webhook delivery waits behind the lane's own jobs only.
    delivery = job_row(priority=3, created_at=T0, queue="webhooks")
    assert why(viewer_client, delivery.id)["details"]["ahead"] == 3


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
    queues.set_limit("queue", "default", max_starts=1, period_seconds=60)
    claim_one(worker, state.enqueue("noop", {})["id"])
    limited = state.enqueue("noop", {})
    page = client.get(f"/jobs/{limited['id']}").content.decode()
    assert 'id="explain" data-reason="limit_full"' in page
    assert "<dt>Starts in the last 60 s</dt><dd>1 of 1</dd>" in page
