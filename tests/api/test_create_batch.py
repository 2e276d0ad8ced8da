"""POST /jobs/batch: up to 1,000 jobs at once, all or none, errors naming each job's index."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.api.serializers import MAX_BATCH
from jobs.filters import TIME_FORMAT_MESSAGE
from jobs.models import Job
from jobs.registry import registry

from .conftest import iso
from .test_job_routes import JOB_FIELDS, assert_error

pytestmark = pytest.mark.django_db

BATCH = "/api/v1/jobs/batch"
EMAIL = {"to": "user@example.com", "subject": "Hello"}
CRON_NOT_TAKEN = "cron is not taken in a batch: create the schedule with POST /api/v1/jobs."


def post(client, body):
    return client.post(BATCH, body, format="json")


def noop(**fields):
    return {"type": "noop", "payload": {}, "priority": 2, **fields}


def test_batch_returns_201_and_the_jobs_in_the_order_submitted(operator_client):
    when = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    submitted = [
        {"type": "send_email", "payload": EMAIL, "priority": 1},
        noop(scheduled_at=iso(when), recur_interval="every_5_minutes", max_retries=7),
        noop(priority=3),
    ]
    response = post(operator_client, {"jobs": submitted})
    assert response.status_code == 201, response.json()
    jobs = response.json()["jobs"]
    assert [set(job) for job in jobs] == [JOB_FIELDS] * 3
    assert [(j["type"], j["priority"], j["status"]) for j in jobs] == [
        ("send_email", 1, "pending"),
        ("noop", 2, "pending"),
        ("noop", 3, "pending"),
    ]
    assert jobs[0]["payload"] == EMAIL
    assert (jobs[1]["scheduled_at"], jobs[1]["recur_interval"]) == (iso(when), "every_5_minutes")
    assert (jobs[1]["max_retries"], jobs[2]["max_retries"]) == (7, 3)
    for job in jobs:
        assert operator_client.get(f"/api/v1/jobs/{job['id']}").json() == job


def test_one_bad_job_refuses_the_whole_batch_naming_every_bad_one(operator_client):
    submitted = [noop(), noop(priority=5), noop(), noop(type="no_such_type", max_retries=0)]
    error = assert_error(post(operator_client, {"jobs": submitted}), 400, "validation_error")
    assert set(error["details"]) == {"jobs.1.priority", "jobs.3.type", "jobs.3.max_retries"}
    assert error["details"]["jobs.1.priority"] == ["Must be 1, 2 or 3."]
    assert Job.objects.count() == 0


def test_domain_rules_name_the_job_and_field(operator_client):
    submitted = [noop(), {"type": "send_email", "payload": {"to": "x@example.com"}, "priority": 1}]
    error = assert_error(post(operator_client, {"jobs": submitted}), 400, "validation_error")
    assert list(error["details"]) == ["jobs.1.payload.subject"]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field", "message_part"),
    [
        ({}, "jobs", "required"),
        ({"jobs": []}, "jobs", "empty"),
        ({"jobs": [noop()] * (MAX_BATCH + 1)}, "jobs", f"no more than {MAX_BATCH}"),
        ({"jobs": [noop()], "queue": "x"}, "queue", "Unknown field"),
        ({"jobs": [noop(depends_on=None)]}, "jobs.0.depends_on", "not taken in a batch"),
        ({"jobs": [noop(), "noop"]}, "jobs.1", "Expected a dictionary"),
        ({"jobs": {"type": "noop"}}, "jobs", "list"),
    ],
)
def test_bad_batch_is_400_naming_the_field(operator_client, body, field, message_part):
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert message_part in " ".join(error["details"][field]), error
    assert Job.objects.count() == 0


def test_the_schema_says_what_the_batch_body_takes_and_nothing_else(client, operator_client):
    body = client.get("/api-docs.json").json()["components"]["schemas"]["JobBatchCreateRequest"]
    assert (body["required"], body["additionalProperties"]) == (["jobs"], False)
    # What a client generated from the schema meets when it sends an extra field anyway.
    error = assert_error(
        post(operator_client, {"jobs": [noop()], "note": 1}), 400, "validation_error"
    )
    assert error["details"] == {"note": ["Unknown field. Allowed: jobs."]}


def test_a_full_batch_is_accepted(operator_client):
    response = post(operator_client, {"jobs": [noop()] * MAX_BATCH})
    assert response.status_code == 201
    assert len(response.json()["jobs"]) == MAX_BATCH == Job.objects.count()


def test_a_viewer_may_not_submit_a_batch(viewer_client):
    assert_error(post(viewer_client, {"jobs": [noop()]}), 403, "permission_denied")
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_each_job_of_a_batch_is_published_after_commit(operator_client, events):
    jobs = post(operator_client, {"jobs": [noop(), noop(priority=1)]}).json()["jobs"]
    for job in jobs:
        event = events.wait_for("job.created", lambda data, job=job: data["id"] == job["id"])
        assert event["data"] == job


def test_every_error_of_every_job_comes_in_one_answer(operator_client):
    # The refusal of job 1's `cron` (the form's) hid job 0's priority and job 1's type (the
    # domain's): a client fixed one, to be refused for the next.
    submitted = [
        {"type": "noop", "payload": {}, "priority": 9},
        {"type": "nope", "payload": {}, "priority": 1, "cron": "* * * * *"},
    ]
    error = assert_error(post(operator_client, {"jobs": submitted}), 400, "validation_error")
    assert list(error["details"].items()) == [
        ("jobs.0.priority", ["Must be 1, 2 or 3."]),
        ("jobs.1.type", [registry.unknown_type_message("nope")]),
        ("jobs.1.cron", [CRON_NOT_TAKEN]),
    ]
    assert error["message"] == "Invalid input: jobs.0.priority, jobs.1.type, jobs.1.cron."
    assert Job.objects.count() == 0


def test_a_job_the_form_refuses_is_still_checked_by_the_domain_in_the_order_of_its_fields(
    operator_client,
):
    submitted = [
        noop(),
        # The form refuses colour; the domain the payload, priority and max_retries.
        {
            "colour": "red",
            "max_retries": 0,
            "priority": "high",
            "payload": {"to": "x@example.com"},
            "type": "send_email",
        },
        # An internal type is unknown to the form: the payload is still checked as any
        # type's is, and scheduled_at by the form.
        {"type": "bulk_action", "payload": [], "priority": 2, "scheduled_at": "soon"},
        # A missing payload is the form's to name, not what the type's schema says of none.
        {"type": "send_email", "priority": 5},
    ]
    body = {"jobs": submitted, "note": 1}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    allowed = "Unknown field. Allowed: type, payload, priority, scheduled_at, recur_interval, "
    assert list(error["details"].items()) == [
        ("note", ["Unknown field. Allowed: jobs."]),
        ("jobs.1.payload.subject", ["This field is required."]),
        ("jobs.1.priority", ["Must be 1, 2 or 3."]),
        ("jobs.1.max_retries", ["Must be an integer from 1 to 10."]),
        ("jobs.1.colour", [allowed + "max_retries, queue."]),
        ("jobs.2.type", [registry.unknown_type_message("bulk_action")]),
        ("jobs.2.payload", ["Must be a JSON object."]),
        ("jobs.2.scheduled_at", [TIME_FORMAT_MESSAGE]),
        ("jobs.3.payload", ["This field is required."]),
        ("jobs.3.priority", ["Must be 1, 2 or 3."]),
    ]
    assert Job.objects.count() == 0
