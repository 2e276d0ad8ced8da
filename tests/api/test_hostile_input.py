"""Input that once made a 500: each is now a 400 in the envelope naming what is wrong, and
nothing is stored. The limits are those of `jobs.limits`."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from jobs import limits
from jobs.filters import TIME_FIELDS
from jobs.models import Job

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
TIME_FILTERS = [f"{name}_{side}" for name in TIME_FIELDS for side in ("before", "after")]


def post_raw(client, raw: str):
    return client.post(JOBS, raw.encode(), content_type="application/json")


def job_body(payload: str) -> str:
    return '{"type": "noop", "priority": 2, "payload": ' + payload + "}"


@pytest.mark.parametrize("depth", [3_000, 100_000])
def test_payload_nested_thousands_deep_is_400(operator_client, depth):
    response = post_raw(operator_client, job_body("[" * depth + "]" * depth))
    error = assert_error(response, 400, "validation_error")
    (message,) = error["details"]["non_field_errors"]
    assert f"nests more than {limits.MAX_JSON_DEPTH} arrays and objects" in message
    assert Job.objects.count() == 0


def nested(depth: int) -> str:
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_payload_may_nest_up_to_the_limit_and_not_one_more(operator_client):
    deepest = post_raw(operator_client, job_body(nested(limits.MAX_JSON_DEPTH)))
    assert deepest.status_code == 201, deepest.json()
    error = assert_error(
        post_raw(operator_client, job_body(nested(limits.MAX_JSON_DEPTH + 1))),
        400,
        "validation_error",
    )
    (message,) = error["details"]["payload"]
    assert f"nests more than {limits.MAX_JSON_DEPTH} arrays and objects" in message
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    "payload",
    [
        r'{"note": "a\u0000b"}',
        r'{"a\u0000": 1}',
        r'{"deep": [{"x": ["\u0000"]}]}',
    ],
)
def test_nul_in_a_payload_key_or_value_is_400_on_the_payload(operator_client, payload):
    error = assert_error(post_raw(operator_client, job_body(payload)), 400, "validation_error")
    assert list(error["details"]) == ["payload"]
    assert "NUL" in error["details"]["payload"][0]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (job_body(r'{"note": "\ud800"}'), "payload"),
        (job_body(r'{"\udfff": 1}'), "payload"),
        (r'{"type": "\ud800", "priority": 2, "payload": {}}', "type"),
        (r'{"type": "noop", "priority": 2, "payload": {}, "\ud800": 1}', "\\ud800"),
    ],
)
def test_lone_surrogate_anywhere_in_the_body_is_400_naming_the_field(operator_client, body, field):
    error = assert_error(post_raw(operator_client, body), 400, "validation_error")
    assert list(error["details"]) == [field]
    assert "lone UTF-16 surrogate" in error["details"][field][0]
    assert Job.objects.count() == 0


def test_a_surrogate_pair_is_one_character_and_accepted(operator_client):
    response = post_raw(operator_client, job_body(r'{"note": "\ud83d\ude00"}'))
    assert response.status_code == 201
    assert response.json()["payload"] == {"note": "\U0001f600"}


@pytest.mark.parametrize("priority", [1, 2, 3])
@pytest.mark.parametrize(
    "scheduled_at", ["9999-12-31T23:30:00Z", "9999-01-01T00:00:00Z", 253402300799999]
)
def test_scheduled_at_past_the_latest_year_is_400(operator_client, priority, scheduled_at):
    body = {"type": "noop", "payload": {}, "priority": priority, "scheduled_at": scheduled_at}
    error = assert_error(operator_client.post(JOBS, body, format="json"), 400, "validation_error")
    (message,) = error["details"]["scheduled_at"]
    assert message.startswith(limits.OUT_OF_RANGE_MESSAGE)
    assert Job.objects.count() == 0


@pytest.mark.parametrize("offset", ["-23:59", "+00:00", "+14:00"])
def test_the_last_moment_of_the_latest_year_is_accepted_with_any_offset(operator_client, offset):
    body = {
        "type": "noop",
        "payload": {},
        "priority": 3,
        "scheduled_at": f"{limits.LATEST_YEAR}-12-31T23:59:59.999{offset}",
        "recur_interval": "every_1_hour",
    }
    response = operator_client.post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.virtual_deadline > job.scheduled_at > timezone.now()


@pytest.mark.parametrize(
    "value", ["0001-01-01T00:00:00+14:00", "0001-01-01", "1969-12-31T23:59:59Z", "-1"]
)
def test_scheduled_at_before_the_earliest_year_is_400(operator_client, value):
    body = {"type": "noop", "payload": {}, "priority": 2, "scheduled_at": value}
    error = assert_error(operator_client.post(JOBS, body, format="json"), 400, "validation_error")
    (message,) = error["details"]["scheduled_at"]
    assert message.startswith(limits.OUT_OF_RANGE_MESSAGE)


OUT_OF_RANGE = [
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "0001-01-01",
    "-62135596800001",
    "99999999999999999999",
]


@pytest.mark.parametrize(
    ("name", "value"),
    [(name, OUT_OF_RANGE[0]) for name in TIME_FILTERS]
    + [("scheduled_before", value) for value in OUT_OF_RANGE[1:]],
)
def test_time_filter_out_of_range_is_400_naming_it(viewer_client, name, value):
    error = assert_error(viewer_client.get(JOBS, {name: value}), 400, "validation_error")
    assert list(error["details"]) == [name]
    assert error["details"][name][0].startswith(limits.OUT_OF_RANGE_MESSAGE)


@pytest.mark.parametrize("value", ["0", str(limits.MAX_MILLISECONDS), "1970-01-01T00:00:00+14:00"])
def test_time_filter_bounds_of_the_range_are_accepted(viewer_client, value):
    assert viewer_client.get(JOBS, {"created_after": value}).status_code == 200


@pytest.mark.parametrize("path", [JOBS, f"{JOBS}/stats", f"{JOBS}/dlq", "/api/v1/health"])
def test_more_query_fields_than_django_reads_is_400_not_500(operator_client, path):
    # Django refuses past DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000) as DRF reads the query; the
    # API had no answer for that and said 500 internal_error on every route.
    response = operator_client.get(path + "?" + "&".join(["a=1"] * 1001))
    assert_error(response, 400, "validation_error")
    assert "1000" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path", "names"),
    [
        ("delete", f"{JOBS}/empty-dlq?type=no_such_type&status=pending", ["type", "status"]),
        ("post", f"{JOBS}?dry_run=1", ["dry_run"]),
    ],
)
def test_a_write_with_a_query_parameter_is_refused_before_it_changes_anything(
    operator_client, job_in_state, method, path, names
):
    # A client filtering what it empties (`?type=...`) emptied the whole DLQ: no write takes
    # a query parameter, and one sent is a mistake to say, not to ignore.
    dead = job_in_state("dlq")
    body = {"type": "noop", "payload": {}, "priority": 2}
    response = getattr(operator_client, method)(path, body, format="json")
    error = assert_error(response, 400, "validation_error")
    assert error["details"] == {name: ["Unknown query parameter."] for name in names}
    assert list(Job.objects.values_list("id", flat=True)) == [uuid.UUID(dead["id"])]
