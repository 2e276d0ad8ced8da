"""Integer fields of JSON bodies take JSON numbers, as the OpenAPI document says: a string
(`"3"`, `" 3 "`, `"٣"`), a boolean or a fraction is refused in the words the domain gives
the same value from Python (`jobs.state.enqueue`, `jobs.queues.set_limit`). DRF's
IntegerField read each of those strings as a number. A number with no fraction, `2.0`, is
the integer it equals, as JSON Schema counts integers."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from jobs import queues, state
from jobs.models import Job, Limit

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
BATCH = "/api/v1/jobs/batch"
LIMIT = "/api/v1/limits/type/noop"
BODY = {"type": "noop", "payload": {}, "priority": 2}
LIMIT_BODY = {"max_running": 5, "max_starts": 10, "period_seconds": 60}
NOT_INTEGERS = ["3", " 3 ", "٣", "3.0", "", True, False, 2.5, [2], {"n": 2}]


def refusal(call: Any, *args: Any, **kwargs: Any) -> dict[str, list[str]]:
    with pytest.raises(state.JobValidationError) as refused:
        call(*args, **kwargs)
    return refused.value.details


def documented(client: Any, schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of `schema`, whose references point into the API's OpenAPI document."""
    document = client.get("/api-docs.json").json()
    return Draft202012Validator({**document, **schema})


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_post_jobs_refuses_what_is_no_integer_as_enqueue_does(operator_client, value):
    for field in ("priority", "max_retries"):
        response = operator_client.post(JOBS, {**BODY, field: value}, format="json")
        details = assert_error(response, 400, "validation_error")["details"]
        expected = refusal(state.enqueue, "noop", {}, **{"priority": 2, field: value})
        assert details == expected, field
    assert not Job.objects.exists()


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_a_batch_refuses_what_is_no_integer_as_enqueue_many_does(operator_client, value):
    for field in ("priority", "max_retries"):
        jobs = [BODY, {**BODY, field: value}]
        response = operator_client.post(BATCH, {"jobs": jobs}, format="json")
        details = assert_error(response, 400, "validation_error")["details"]
        specs = [state.JobSpec(**job) for job in jobs]
        expected = refusal(state.enqueue_many, specs)
        assert details == {f"jobs.{key}": messages for key, messages in expected.items()}
    assert not Job.objects.exists()


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_put_limit_refuses_what_is_no_integer_as_set_limit_does(operator_client, value):
    for field in LIMIT_BODY:
        body = {**LIMIT_BODY, field: value}
        response = operator_client.put(LIMIT, body, format="json")
        details = assert_error(response, 400, "validation_error")["details"]
        assert details == refusal(queues.set_limit, "type", "noop", **body), field
    assert not Limit.objects.exists()


def test_a_number_with_no_fraction_is_the_integer_it_equals(operator_client):
    job = operator_client.post(JOBS, {**BODY, "priority": 3.0, "max_retries": 5.0}, format="json")
    assert job.status_code == 201, job.json()
    assert (job.json()["priority"], job.json()["max_retries"]) == (3, 5)
    batch = operator_client.post(BATCH, {"jobs": [{**BODY, "priority": 1.0}]}, format="json")
    assert batch.status_code == 201, batch.json()
    assert batch.json()["jobs"][0]["priority"] == 1
    limit = operator_client.put(LIMIT, {k: float(v) for k, v in LIMIT_BODY.items()}, format="json")
    assert limit.status_code == 200, limit.json()
    assert {k: limit.json()[k] for k in LIMIT_BODY} == LIMIT_BODY


def test_the_openapi_document_and_post_jobs_agree_on_priority(operator_client):
    schema = documented(operator_client, {"$ref": "#/components/schemas/JobCreateRequest"})
    for value in [*NOT_INTEGERS, 1, 3.0, 4, 0]:
        body = {**BODY, "priority": value}
        response = operator_client.post(JOBS, body, format="json")
        assert (response.status_code == 201) == schema.is_valid(body), (value, response.json())


def test_the_openapi_document_and_put_limit_agree_on_max_running(operator_client):
    document = operator_client.get("/api-docs.json").json()
    put = document["paths"]["/api/v1/limits/{scope}/{name}"]["put"]
    schema = documented(
        operator_client, put["requestBody"]["content"]["application/json"]["schema"]
    )
    for value in [*NOT_INTEGERS, 1, 3.0, 0]:
        body = {"max_running": value}
        response = operator_client.put(LIMIT, body, format="json")
        assert (response.status_code == 200) == schema.is_valid(body), (value, response.json())


@pytest.mark.parametrize(
    ("query", "parameter"),
    [("limit=٣", "limit"), ("page=%202%20", "page"), ("limit=1_0", "limit"), ("page=+2", "page")],
)
def test_a_page_or_limit_is_written_in_ascii_digits(viewer_client, query, parameter):
    # int() read each of these as a number, where the document says integer.
    refused = viewer_client.get(f"/api/v1/jobs?{query}")
    assert_error(refused, 400, "validation_error")
    assert refused.json()["error"]["details"] == {parameter: ["Must be a positive integer."]}
