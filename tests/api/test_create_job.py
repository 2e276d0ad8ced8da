"""POST /jobs: what is accepted, and each way a body is refused."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.api.errors import PayloadTooLarge
from jobs.api.parsers import JSONBodyParser
from jobs.models import Job
from jobs.registry import registry

from .conftest import iso, ms
from .test_job_routes import JOB_FIELDS, assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
EMAIL = {"to": "user@example.com", "subject": "Hello"}


def post(client, body, **extra):
    return client.post(JOBS, body, format="json", **extra)


def test_create_returns_201_the_job_and_its_location(operator_client):
    response = post(operator_client, {"type": "send_email", "payload": EMAIL, "priority": 1})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == JOB_FIELDS
    assert body["type"] == "send_email"
    assert body["payload"] == EMAIL
    assert (body["priority"], body["status"], body["attempt_count"]) == (1, "pending", 0)
    assert (body["max_retries"], body["in_dlq"], body["depends_on"]) == (3, False, None)
    assert response["Location"] == f"http://testserver{JOBS}/{body['id']}"
    assert operator_client.get(response["Location"]).json() == body
    assert Job.objects.filter(id=body["id"]).exists()


def test_numbers_in_the_payload_come_back_exactly(operator_client):
    # Integers past 64 bits are where JSON decoders differ: some return a float.
    payload = {
        "past_64_bits": 123456789012345678901234567890,
        "below_minus_2_63": -(2**63) - 1,
        "largest_unsigned_64": 2**64 - 1,
        "float_of_an_integer": 1e20,
        "fraction": 0.1,
        "nested": [{"n": 2**70}],
    }
    response = post(operator_client, {"type": "noop", "payload": payload, "priority": 2})
    assert response.status_code == 201
    assert response.json()["payload"] == payload
    assert operator_client.get(response["Location"]).json()["payload"] == payload


def test_create_takes_every_optional_field(operator_client):
    upstream = post(operator_client, {"type": "noop", "payload": {}, "priority": 2}).json()
    when = (timezone.now() + timedelta(hours=1)).replace(microsecond=123000)
    response = post(
        operator_client,
        {
            "type": "noop",
            "payload": {"k": [1, 2]},
            "priority": 3,
            "scheduled_at": iso(when),
            "recur_interval": "every_5_minutes",
            "depends_on": upstream["id"],
            "max_retries": 7,
        },
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["scheduled_at"] == iso(when)
    assert body["recur_interval"] == "every_5_minutes"
    assert body["depends_on"] == upstream["id"]
    assert body["max_retries"] == 7


@pytest.mark.parametrize("form", [ms, iso, lambda t: t.isoformat()])
def test_scheduled_at_takes_unix_ms_or_iso(operator_client, form):
    when = (timezone.now() + timedelta(days=1)).replace(microsecond=0)
    body = {"type": "noop", "payload": {}, "priority": 2, "scheduled_at": form(when)}
    response = post(operator_client, body)
    assert response.status_code == 201, response.json()
    assert response.json()["scheduled_at"] == iso(when)


@pytest.mark.parametrize("form", [ms, iso])
def test_scheduled_at_in_the_past_is_refused(operator_client, form):
    past = datetime(2020, 1, 1, tzinfo=UTC)
    body = {"type": "noop", "payload": {}, "priority": 2, "scheduled_at": form(past)}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert error["details"] == {"scheduled_at": ["Must be in the future."]}


@pytest.mark.parametrize(
    ("change", "field", "message_part"),
    [
        ({"type": "no_such_type"}, "type", "Registered types"),
        ({"priority": 5}, "priority", "Must be 1, 2 or 3."),
        ({"priority": 0}, "priority", "Must be 1, 2 or 3."),
        ({"priority": "high"}, "priority", "Must be 1, 2 or 3."),
        ({"priority": True}, "priority", "Must be 1, 2 or 3."),
        ({"payload": [1, 2]}, "payload", "JSON object"),
        ({"payload": None}, "payload", "Must be a JSON object."),
        ({"max_retries": 11}, "max_retries", "1 to 10"),
        ({"max_retries": 0}, "max_retries", "1 to 10"),
        ({"recur_interval": "every_day"}, "recur_interval", "Must be one of"),
        ({"scheduled_at": "tomorrow"}, "scheduled_at", "Unix milliseconds"),
        ({"depends_on": "nope"}, "depends_on", "valid UUID"),
    ],
)
def test_bad_field_is_400_naming_it(operator_client, change, field, message_part):
    body = {"type": "noop", "payload": {}, "priority": 2, **change}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert field in error["details"], error
    assert message_part in " ".join(error["details"][field])
    assert Job.objects.count() == 0


def test_unknown_type_lists_the_registered_ones(operator_client):
    body = {"type": "sendmail", "payload": {}, "priority": 2}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    for name in registry.submittable():
        assert name in error["details"]["type"][0]


def test_an_internal_job_type_is_not_submitted_from_outside(operator_client):
    # A bulk_action job made by hand would cancel or purge whatever its payload matched,
    # without the count the console confirms nor the audit entry it records.
    payload = {"action": "purge", "query": {}, "dlq": True, "as_of": "2026-01-01T00:00:00Z"}
    body = {"type": "bulk_action", "payload": payload, "priority": 1}
    for path, sent in ((JOBS, body), (f"{JOBS}/batch", {"jobs": [body]})):
        error = assert_error(
            operator_client.post(path, sent, format="json"), 400, "validation_error"
        )
        (field,) = error["details"]
        assert (
            field.endswith("type")
            and "Unknown job type 'bulk_action'" in error["details"][field][0]
        )
    assert "bulk_action" not in registry.submittable() and not Job.objects.exists()
    schema = operator_client.get("/api-docs.json").json()["components"]["schemas"]
    assert "bulk_action" not in json.dumps(schema["JobCreateRequest"])


def test_payload_is_checked_against_the_handler_schema(operator_client):
    body = {"type": "send_email", "payload": {"subject": "no recipient"}, "priority": 2}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert error["details"] == {"payload.to": ["This field is required."]}


@pytest.mark.parametrize("url", ["https://example.com/a b", "https://example.com/\x01", "ftp://x"])
def test_an_http_request_to_a_url_no_request_could_carry_is_refused(operator_client, url):
    # http.client refuses a space or control character in a URL: every attempt would fail.
    body = {"type": "http_request", "payload": {"url": url}, "priority": 2}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert error["details"] == {
        "payload.url": [
            "Must be an http:// or https:// URL without spaces, control characters or "
            "invisible formatting characters such as U+202E (%-encode them)."
        ]
    }
    assert Job.objects.count() == 0


def test_missing_required_fields_are_each_named(operator_client):
    error = assert_error(post(operator_client, {}), 400, "validation_error")
    assert set(error["details"]) == {"type", "payload", "priority"}


def test_depends_on_must_exist(operator_client):
    body = {"type": "noop", "payload": {}, "priority": 2, "depends_on": str(uuid.uuid4())}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert "depends_on" in error["details"]


def test_unknown_fields_are_refused_by_name(operator_client):
    body = {"type": "noop", "payload": {}, "priority": 2, "priorty": 1, "retries": 3}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    assert set(error["details"]) == {"priorty", "retries"}
    assert "Unknown field" in error["details"]["priorty"][0]
    assert Job.objects.count() == 0


@pytest.mark.parametrize("raw", [b'{"type": "noop",', b"not json", b"{'a': 1}", b'{"a": NaN}'])
def test_malformed_json_is_400_malformed_json(operator_client, raw):
    response = operator_client.post(JOBS, raw, content_type="application/json")
    assert_error(response, 400, "malformed_json")


def test_body_that_is_not_an_object_is_a_validation_error(operator_client):
    response = operator_client.post(JOBS, b"[1, 2]", content_type="application/json")
    assert_error(response, 400, "validation_error")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_body_that_is_not_json_media_type_is_415(operator_client, content_type):
    body = json.dumps({"type": "noop", "payload": {}, "priority": 2})
    response = operator_client.post(JOBS, body, content_type=content_type)
    assert_error(response, 415, "unsupported_media_type")
    assert Job.objects.count() == 0


def test_json_with_charset_is_accepted(operator_client):
    body = json.dumps({"type": "noop", "payload": {}, "priority": 2})
    response = operator_client.post(JOBS, body, content_type="application/json; charset=utf-8")
    assert response.status_code == 201


def test_body_over_the_limit_is_413(operator_client, settings):
    big = {"type": "noop", "payload": {"blob": "x" * settings.API_MAX_BODY_BYTES}, "priority": 2}
    error = assert_error(post(operator_client, big), 413, "payload_too_large")
    assert str(settings.API_MAX_BODY_BYTES) in error["message"]
    assert Job.objects.count() == 0


def test_body_of_exactly_the_limit_is_accepted_one_more_byte_is_413(operator_client, settings):
    settings.API_MAX_BODY_BYTES = 2048
    template = '{"type": "noop", "payload": {"blob": "%s"}, "priority": 2}'
    exact = (template % ("x" * (2048 - len(template % "")))).encode()
    assert len(exact) == 2048
    response = operator_client.post(JOBS, exact, content_type="application/json")
    assert response.status_code == 201
    response = operator_client.post(JOBS, exact + b" ", content_type="application/json")
    assert_error(response, 413, "payload_too_large")


def test_parser_stops_reading_at_the_limit_whatever_the_headers_said(settings):
    # The cap does not rest on the Content-Length header alone: the parser counts bytes.
    settings.API_MAX_BODY_BYTES = 100
    raw = json.dumps({"payload": {"blob": "x" * 200}}).encode()
    with pytest.raises(PayloadTooLarge):
        JSONBodyParser().parse(io.BytesIO(raw))
    assert JSONBodyParser().parse(io.BytesIO(b'{"a": 1}')) == {"a": 1}


@pytest.mark.django_db(transaction=True)
def test_created_job_is_published_after_commit(operator_client, events):
    body = post(operator_client, {"type": "noop", "payload": {}, "priority": 2}).json()
    event = events.wait_for("job.created", lambda data: data["id"] == body["id"])
    assert event["data"] == body


def test_the_schema_takes_every_field_the_server_takes(operator_client):
    # `queue` was accepted by both routes and documented in the README, but the schema's
    # branches refused unknown fields and did not name it: a client validating against the
    # schema (a generated SDK, Postman) dropped or refused it.
    schemas = operator_client.get("/api-docs.json").json()["components"]["schemas"]
    job = {"type": "noop", "payload": {}, "priority": 2, "queue": "emails"}
    for name, path, body in (
        ("JobCreateRequest", JOBS, job),
        ("JobBatchItemRequest", f"{JOBS}/batch", {"jobs": [job]}),
    ):
        for branch in schemas[name]["oneOf"]:
            assert set(job) <= set(branch["properties"]), (name, branch["properties"])
        assert operator_client.post(path, body, format="json").status_code == 201


def test_every_error_of_a_job_comes_in_one_answer_in_the_order_of_its_fields(operator_client):
    # The form's refusals (an unknown field) hid the domain's (an unknown type, a priority
    # that is no integer, too few attempts): a client fixed one, to be refused for the next.
    body = {"colour": "red", "max_retries": 0, "priority": "high", "payload": {}, "type": "nope"}
    error = assert_error(post(operator_client, body), 400, "validation_error")
    allowed = (
        "Unknown field. Allowed: type, payload, priority, scheduled_at, recur_interval, "
        "depends_on, max_retries, cron, timezone, queue."
    )
    assert list(error["details"].items()) == [
        ("type", [registry.unknown_type_message("nope")]),
        ("priority", ["Must be 1, 2 or 3."]),
        ("max_retries", ["Must be an integer from 1 to 10."]),
        ("colour", [allowed]),
    ]
    assert Job.objects.count() == 0
