"""GET /metrics: Prometheus text from the database, so any web process answers the same."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from jobs import retention, state
from jobs.models import JobAttempt, Worker

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


def scrape(client: APIClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


# A scrape asks whether the database answers before it reads credentials (a wait bounded as a
# probe's: test_database_outage.py), a refused scrape too.
@pytest.mark.django_db
def test_metrics_need_credentials_like_the_api(anon_client: APIClient) -> None:
    response = anon_client.get("/metrics")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        ("text/plain", "text/plain; version=0.0.4"),
        ("text/plain;version=0.0.4;q=0.9,*/*;q=0.1", "text/plain; version=0.0.4"),
        ("application/openmetrics-text", "application/openmetrics-text; version=1.0.0"),
        ("application/openmetrics-text; version=1.0.0", "application/openmetrics-text"),
    ],
)
def test_a_scraper_gets_the_text_format_it_asks_for(
    viewer_client: APIClient, accept: str, served: str
) -> None:
    # Asked for by name (not with */*, as Prometheus's default does), both were a 406: the
    # API's content negotiation, which knows only JSON, refused them.
    response = viewer_client.get("/metrics", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"].startswith(served)
    assert b"scheduler_jobs" in response.content


def test_jobs_of_two_queues_are_counted_under_their_own_queue(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    job_in_state("completed", queue="emails")
    job_in_state("pending", queue="emails")
    job_in_state("dlq", queue="reports")

    samples = scrape(viewer_client)
    emails, reports = labels(queue="emails", type="noop"), labels(queue="reports", type="noop")
    assert samples[("scheduler_jobs_created_total", emails)] == 2
    assert samples[("scheduler_jobs_completed_total", emails)] == 1
    assert samples[("scheduler_jobs_created_total", reports)] == 1
    assert samples[("scheduler_jobs_failed_total", reports)] == 1
    assert samples[("scheduler_jobs_dead_lettered_total", reports)] == 1
    assert ("scheduler_jobs_completed_total", reports) not in samples
    assert not [key for key in samples if ("queue", "default") in key[1]]
    assert samples[("scheduler_job_wait_seconds_count", emails)] == 1
    assert samples[("scheduler_job_run_seconds_count", (("outcome", "failed"), *reports))] == 1
    gauge = {
        (dict(key)["queue"], dict(key)["state"]): value
        for (name, key), value in samples.items()
        if name == "scheduler_jobs" and value
    }
    assert gauge == {("emails", "completed"): 1, ("emails", "pending"): 1, ("reports", "dlq"): 1}


def test_metrics_count_what_happened_to_jobs_by_type_and_queue(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]], worker: Worker
) -> None:
    for target in ("pending", "completed", "failed", "dlq", "processing", "cancelled"):
        job_in_state(target)
    retention.prune(limit=10, continues=False)

    samples = scrape(viewer_client)
    by_type = labels(queue="default", type="noop")
    assert samples[("scheduler_jobs_created_total", by_type)] == 6
    assert samples[("scheduler_jobs_completed_total", by_type)] == 1
    assert samples[("scheduler_jobs_failed_total", by_type)] == 2
    assert samples[("scheduler_jobs_retried_total", by_type)] == 1
    assert samples[("scheduler_jobs_dead_lettered_total", by_type)] == 1
    assert samples[("scheduler_jobs_cancelled_total", by_type)] == 1
    for name, n in {"pending": 1, "processing": 1, "completed": 1, "failed": 1, "dlq": 1}.items():
        assert samples[("scheduler_jobs", labels(state=name, queue="default"))] == n
    # Four claims waited; three attempts ended, one ran to success.
    assert samples[("scheduler_job_wait_seconds_count", by_type)] == 4
    inf = labels(queue="default", type="noop", le="+Inf")
    assert samples[("scheduler_job_wait_seconds_bucket", inf)] == 4
    ran = {
        outcome: samples[("scheduler_job_run_seconds_count", (("outcome", outcome), *by_type))]
        for outcome in ("succeeded", "failed")
    }
    assert ran == {"succeeded": 1, "failed": 2}
    this_worker = labels(host="test-host", pid=str(worker.pid), worker=str(worker.id))
    assert samples[("scheduler_workers_live", ())] == 1
    assert samples[("scheduler_worker_up", this_worker)] == 1
    assert samples[("scheduler_worker_busy_slots", this_worker)] == 1
    assert samples[("scheduler_worker_slots", this_worker)] == 1
    assert not [key for key in samples if key[0] == "scheduler_worker_unhandled_type"]
    Worker.objects.filter(id=worker.id).update(unhandled_types=["resize_image"])
    missing = labels(
        host="test-host", pid=str(worker.pid), type="resize_image", worker=str(worker.id)
    )
    assert scrape(viewer_client)[("scheduler_worker_unhandled_type", missing)] == 1
    assert samples[("scheduler_prune_runs_total", ())] == 1


def test_a_running_attempt_an_operator_cancelled_is_no_failure(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    # Counted as failed by the run histogram but not by _failed_total, the README's failure
    # ratio and the run counts disagreed.
    running = job_in_state("processing")
    state.cancel(uuid.UUID(running["id"]))

    samples = scrape(viewer_client)
    by_type = labels(queue="default", type="noop")
    assert samples[("scheduler_jobs_cancelled_total", by_type)] == 1
    assert ("scheduler_jobs_failed_total", by_type) not in samples
    ran = {
        outcome: samples.get(("scheduler_job_run_seconds_count", (("outcome", outcome), *by_type)))
        for outcome in ("succeeded", "failed", "cancelled")
    }
    assert ran == {"succeeded": None, "failed": None, "cancelled": 1}


def test_a_claim_handed_back_unstarted_is_no_failure_and_no_retry(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    # A hand-back moves a job from processing back to pending, as a rescue does: it counted
    # as a failed and a retried attempt, though no handler ran (a probe's 1,500 successes
    # showed 224 failures).
    running = job_in_state("processing")
    (attempt_id,) = JobAttempt.objects.filter(job_id=running["id"]).values_list("id", flat=True)
    state.hand_back([(uuid.UUID(running["id"]), attempt_id)])

    samples = scrape(viewer_client)
    by_type = labels(queue="default", type="noop")
    assert ("scheduler_jobs_failed_total", by_type) not in samples
    assert ("scheduler_jobs_retried_total", by_type) not in samples
    assert samples[("scheduler_jobs", labels(state="pending", queue="default"))] == 1
