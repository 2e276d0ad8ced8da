"""Every job route other than listing and creating: detail, attempts, the operator actions,
stats, the DLQ routes, and the precedence of the fixed paths over `/jobs/{id}`."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import state
from jobs.api.serializers import JobSerializer
from jobs.models import Job, JobAttempt, JobLog

from .conftest import claim_one

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
JOB_FIELDS = {
    "id", "type", "payload", "priority", "status", "attempt_count", "max_retries",
    "scheduled_at", "recur_interval", "depends_on", "in_dlq", "created_at", "updated_at",
    "started_at", "completed_at", "cancelled_at", "next_retry_at", "last_error", "result",
    "worker_id", "schedule_id", "upstream_ids", "queue",
}  # fmt: skip


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def test_the_documented_job_schema_is_the_job_object_the_api_returns(viewer_client, job_in_state):
    # The job object is built by one SQL function; the serializer only documents it (OpenAPI).
    body = viewer_client.get(f"{JOBS}/{job_in_state('pending')['id']}").json()
    assert set(JobSerializer().fields) == set(body) == JOB_FIELDS


def test_get_job_returns_the_job_object(viewer_client, job_in_state):
    job = job_in_state("completed")
    response = viewer_client.get(f"{JOBS}/{job['id']}")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == JOB_FIELDS
    assert body["id"] == job["id"]
    assert body["status"] == "completed"
    assert body["result"] == {"ok": True}
    assert body["completed_at"].endswith("Z") and len(body["completed_at"]) == 24


@pytest.mark.parametrize("result", ["ok", "", 0, 1.5, False, [1, "two"], None])
def test_any_json_result_reads_back_as_the_handler_returned_it(viewer_client, worker, result):
    job = state.enqueue("noop", {}, priority=2)
    claimed = claim_one(worker, job["id"])
    (completed,) = state.complete(
        [state.Success(claimed.id, claimed.attempt_id, result, timezone.now())], worker.id
    ).completed
    assert completed["result"] == result
    body = viewer_client.get(f"{JOBS}/{job['id']}").json()
    assert (body["status"], body["result"]) == ("completed", result)


def test_get_job_shows_its_dependency(viewer_client, job_in_state):
    upstream = job_in_state("pending")
    downstream = job_in_state("pending", depends_on=uuid.UUID(upstream["id"]))
    assert viewer_client.get(f"{JOBS}/{downstream['id']}").json()["depends_on"] == upstream["id"]


def test_unknown_job_is_404(viewer_client):
    assert_error(viewer_client.get(f"{JOBS}/{uuid.uuid4()}"), 404, "not_found")


@pytest.mark.parametrize("suffix", ["", "/attempts"])
def test_id_that_is_not_a_uuid_is_400(viewer_client, suffix):
    error = assert_error(viewer_client.get(f"{JOBS}/not-a-uuid{suffix}"), 400, "validation_error")
    assert "id" in error["details"]


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_action_on_bad_uuid_is_400(operator_client, action):
    assert_error(operator_client.post(f"{JOBS}/12345/{action}"), 400, "validation_error")


def test_purge_of_bad_uuid_is_400(operator_client):
    assert_error(operator_client.delete(f"{JOBS}/12345/purge"), 400, "validation_error")


def test_attempts_are_listed_oldest_first_with_their_fields(viewer_client, job_in_state, worker):
    job = job_in_state("failed")
    job_id = uuid.UUID(job["id"])
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(hours=1))
    (claimed,) = state.claim(worker.id, 1, [job_id])
    state.complete([state.Success(job_id, claimed.attempt_id, 1, timezone.now())], worker.id)
    response = viewer_client.get(f"{JOBS}/{job['id']}/attempts")
    assert response.status_code == 200
    first, second = response.json()
    assert set(first) == {
        "attempt_number", "status", "started_at", "finished_at", "duration_ms",
        "error_type", "error_message", "stack_trace", "worker_id",
    }  # fmt: skip
    assert (first["attempt_number"], first["status"]) == (1, "failed")
    assert (first["error_type"], first["error_message"]) == ("RuntimeError", "boom")
    assert first["stack_trace"] == "Traceback ..."
    assert first["worker_id"] == str(worker.id)
    assert (second["attempt_number"], second["status"]) == (2, "succeeded")
    assert second["error_type"] is None


def test_attempts_of_a_job_that_never_ran_are_empty(viewer_client, job_in_state):
    job = job_in_state("pending")
    response = viewer_client.get(f"{JOBS}/{job['id']}/attempts")
    assert (response.status_code, response.json()) == (200, [])


def test_attempts_of_unknown_job_is_404(viewer_client):
    assert_error(viewer_client.get(f"{JOBS}/{uuid.uuid4()}/attempts"), 404, "not_found")


@pytest.mark.parametrize("status", ["pending", "processing", "failed"])
def test_cancel_applies_to_unfinished_jobs(operator_client, job_in_state, status):
    job = job_in_state(status)
    response = operator_client.post(f"{JOBS}/{job['id']}/cancel")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled"
    assert body["cancelled_at"] is not None
    assert Job.objects.get(id=job["id"]).status == "cancelled"


@pytest.mark.parametrize(
    ("status", "reported"), [("completed", "completed"), ("cancelled", "cancelled"), ("dlq", "dlq")]
)
def test_cancel_of_a_finished_job_is_409_naming_its_state(
    operator_client, job_in_state, status, reported
):
    job = job_in_state(status)
    error = assert_error(operator_client.post(f"{JOBS}/{job['id']}/cancel"), 409, "invalid_state")
    assert error["details"] == {"status": reported}
    assert Job.objects.get(id=job["id"]).status == job["status"]


def test_cancel_of_unknown_job_is_404(operator_client):
    assert_error(operator_client.post(f"{JOBS}/{uuid.uuid4()}/cancel"), 404, "not_found")


def test_retry_of_a_dlq_job_resets_it_and_keeps_history(operator_client, job_in_state):
    job = job_in_state("dlq")
    response = operator_client.post(f"{JOBS}/{job['id']}/retry")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["attempt_count"], body["in_dlq"]) == ("pending", 0, False)
    assert JobAttempt.objects.filter(job_id=job["id"]).count() == 1


@pytest.mark.parametrize("status", ["pending", "processing", "failed", "completed", "cancelled"])
def test_retry_of_a_job_not_in_the_dlq_is_409(operator_client, job_in_state, status):
    job = job_in_state(status)
    error = assert_error(operator_client.post(f"{JOBS}/{job['id']}/retry"), 409, "invalid_state")
    assert error["details"] == {"status": status}


def test_retry_of_unknown_job_is_404(operator_client):
    assert_error(operator_client.post(f"{JOBS}/{uuid.uuid4()}/retry"), 404, "not_found")


def test_purge_deletes_a_dlq_job_with_attempts_and_logs(operator_client, job_in_state):
    job = job_in_state("dlq")
    attempt = JobAttempt.objects.get(job_id=job["id"])
    JobLog.objects.create(
        job_id=job["id"], attempt=attempt, created_at=attempt.started_at, message="hi"
    )
    response = operator_client.delete(f"{JOBS}/{job['id']}/purge")
    assert response.status_code == 204
    assert response.content == b""
    assert not Job.objects.filter(id=job["id"]).exists()
    assert not JobAttempt.objects.filter(job_id=job["id"]).exists()
    assert not JobLog.objects.filter(job_id=job["id"]).exists()
    assert_error(operator_client.get(f"{JOBS}/{job['id']}"), 404, "not_found")


@pytest.mark.parametrize("status", ["pending", "failed", "completed"])
def test_purge_of_a_job_not_in_the_dlq_is_409(operator_client, job_in_state, status):
    job = job_in_state(status)
    error = assert_error(operator_client.delete(f"{JOBS}/{job['id']}/purge"), 409, "invalid_state")
    assert error["details"] == {"status": status}
    assert Job.objects.filter(id=job["id"]).exists()


def test_purge_of_unknown_job_is_404(operator_client):
    assert_error(operator_client.delete(f"{JOBS}/{uuid.uuid4()}/purge"), 404, "not_found")


def test_empty_dlq_purges_only_dlq_jobs(operator_client, job_in_state):
    dlq = [job_in_state("dlq") for _ in range(3)]
    kept = [job_in_state("failed"), job_in_state("completed")]
    response = operator_client.delete(f"{JOBS}/empty-dlq")
    assert (response.status_code, response.json()) == (200, {"purged": 3})
    assert not Job.objects.filter(id__in=[j["id"] for j in dlq]).exists()
    assert Job.objects.filter(id__in=[j["id"] for j in kept]).count() == 2
    assert operator_client.delete(f"{JOBS}/empty-dlq").json() == {"purged": 0}


def test_stats_counts_each_state(viewer_client, job_in_state):
    for status, count in [
        ("pending", 3), ("processing", 1), ("completed", 2), ("failed", 1), ("dlq", 2),
        ("cancelled", 1),
    ]:  # fmt: skip
        for _ in range(count):
            job_in_state(status)
    response = viewer_client.get(f"{JOBS}/stats")
    assert response.status_code == 200
    assert response.json() == {
        "pending": 3, "processing": 1, "completed": 2, "failed": 1, "dlq": 2, "cancelled": 1,
        "total": 10,
    }  # fmt: skip


def test_dlq_route_lists_only_dlq_jobs(viewer_client, job_in_state):
    dlq = job_in_state("dlq")
    job_in_state("failed")
    job_in_state("completed")
    body = viewer_client.get(f"{JOBS}/dlq").json()
    assert body["count"] == 1
    assert [job["id"] for job in body["results"]] == [dlq["id"]]


def test_dlq_route_takes_the_list_filters(viewer_client, job_in_state):
    job_in_state("dlq", priority=1)
    low = job_in_state("dlq", priority=3)
    body = viewer_client.get(f"{JOBS}/dlq", {"priority": 3}).json()
    assert [job["id"] for job in body["results"]] == [low["id"]]
    assert_error(viewer_client.get(f"{JOBS}/dlq", {"priority": 7}), 400, "validation_error")


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("get", "stats", 200),
        ("get", "dlq", 200),
        ("delete", "empty-dlq", 200),
        # A fixed path with the wrong method is 405, not the {id} route's 400.
        ("post", "stats", 405),
        ("delete", "dlq", 405),
        ("get", "empty-dlq", 405),
        ("get", "batch", 405),
    ],
)
def test_fixed_paths_are_never_taken_for_an_id(operator_client, method, path, expected):
    response = getattr(operator_client, method)(f"{JOBS}/{path}")
    assert response.status_code == expected
    if expected == 405:
        assert_error(response, 405, "method_not_allowed")


def test_trailing_slash_is_not_a_route(viewer_client):
    assert_error(viewer_client.get(f"{JOBS}/stats/"), 404, "not_found")
    assert_error(viewer_client.get(f"{JOBS}/"), 404, "not_found")
