"""One job, one judgement: what `jobs.state.enqueue` / `enqueue_many` refuse from Python,
POST /jobs and POST /jobs/batch refuse in the same words, and what one takes the other takes.
A string is taken as sent: no field is trimmed, none is read from a number."""

from __future__ import annotations

from typing import Any

import pytest

from jobs import state
from jobs.models import Job, Schedule

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
BATCH = "/api/v1/jobs/batch"
BODY: dict[str, Any] = {"type": "noop", "payload": {}, "priority": 2}
EVERY_MINUTE = "* * * * *"
# A valid expression longer than the 200 characters a schedule's `cron` holds.
LONG_CRON = f"{','.join(map(str, range(60)))} {','.join(map(str, range(24)))} * * *"
BAD_KEY = " key"

# Changes to a good job that each surface refuses; the batch takes the first ones too.
IN_A_BATCH: list[dict[str, Any]] = [
    {"type": None},
    {"payload": None},
    {"priority": None},
    {"type": " noop "},
    {"type": ""},
    {"type": 5},
    {"type": ["noop"]},
    {"type": "x" * 101},
    {"queue": " emails "},
    {"queue": 5},
    {"queue": 5.5},
    {"recur_interval": "every_day"},
    {"recur_interval": ""},
]
ALONE = [
    *IN_A_BATCH,
    {"cron": EVERY_MINUTE, "timezone": " UTC "},
    {"cron": EVERY_MINUTE, "timezone": "UTC\n"},
    {"cron": EVERY_MINUTE, "timezone": ["UTC"]},
    {"cron": EVERY_MINUTE, "timezone": 0},
    {"cron": ""},
    {"cron": "   "},
    {"cron": 5},
    {"cron": LONG_CRON},
    {"timezone": ""},
    {"timezone": " UTC "},
]


def refusal(call: Any) -> dict[str, list[str]]:
    with pytest.raises(state.JobValidationError) as refused:
        call()
    return refused.value.details


@pytest.mark.parametrize("change", ALONE, ids=repr)
def test_post_jobs_refuses_a_job_in_the_words_of_enqueue(operator_client, change):
    job = {**BODY, **change}
    response = operator_client.post(JOBS, job, format="json")
    details = assert_error(response, 400, "validation_error")["details"]
    assert details == refusal(lambda: state.enqueue(**job))
    assert not Job.objects.exists()
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("change", IN_A_BATCH, ids=repr)
def test_post_jobs_batch_refuses_a_job_in_the_words_of_enqueue_many(operator_client, change):
    jobs = [BODY, {**BODY, **change}]
    response = operator_client.post(BATCH, {"jobs": jobs}, format="json")
    details = assert_error(response, 400, "validation_error")["details"]
    specs = [state.JobSpec(**job) for job in jobs]
    expected = refusal(lambda: state.enqueue_many(specs))
    assert details == {f"jobs.{key}": messages for key, messages in expected.items()}
    assert not Job.objects.exists()


@pytest.mark.parametrize("change", [{"type": {}}, {"type": ["noop"]}, {"queue": {}}], ids=repr)
def test_a_batch_under_a_key_is_judged_as_one_without(operator_client, change):
    # The key is looked at before the jobs (a repeat answers the first request's jobs), and
    # the fingerprint of a type that was no string raised TypeError: a 500 over HTTP.
    jobs = [BODY, {**BODY, **change}]
    response = operator_client.post(BATCH, {"jobs": jobs}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    details = assert_error(response, 400, "validation_error")["details"]
    specs = [state.JobSpec(**job) for job in jobs]
    expected = refusal(lambda: state.enqueue_many(specs, idempotency_key="k"))
    assert details == {f"jobs.{key}": messages for key, messages in expected.items()}
    assert expected == refusal(lambda: state.enqueue_many(specs))
    assert not Job.objects.exists()


def test_enqueue_many_under_a_bad_key_names_every_error_at_once_as_the_batch_route_does(
    operator_client,
):
    # Python named only the key: a caller fixed it, to be refused for the jobs next.
    jobs = [BODY, {**BODY, "priority": 9}, {**BODY, "queue": "a b"}]
    specs = [state.JobSpec(**job) for job in jobs]
    details = refusal(lambda: state.enqueue_many(specs, idempotency_key=BAD_KEY))
    key_rule = state.idempotency_key_errors(BAD_KEY)["idempotency_key"]
    assert list(details.items()) == [
        ("1.priority", ["Must be 1, 2 or 3."]),
        ("2.queue", details["2.queue"]),
        ("idempotency_key", key_rule),
    ]
    response = operator_client.post(
        BATCH, {"jobs": jobs}, format="json", HTTP_IDEMPOTENCY_KEY=BAD_KEY
    )
    answered = assert_error(response, 400, "validation_error")["details"]
    assert answered == {
        (key if key == "idempotency_key" else f"jobs.{key}"): messages
        for key, messages in details.items()
    }
    assert not Job.objects.exists()


def test_enqueue_under_a_bad_key_names_every_error_at_once_as_post_jobs_does(operator_client):
    job = {**BODY, "priority": 9}
    details = refusal(lambda: state.enqueue(**job, idempotency_key=BAD_KEY))
    response = operator_client.post(JOBS, job, format="json", HTTP_IDEMPOTENCY_KEY=BAD_KEY)
    assert assert_error(response, 400, "validation_error")["details"] == details
    assert list(details) == ["priority", "idempotency_key"]
