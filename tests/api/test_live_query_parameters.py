"""The live routes (`jobs.live`: the event stream at both paths, and its hub's status) take no
query parameter, and refuse one as every API read refuses one it does not declare: a 400 in
the one error shape naming it, a repeated one named as repeated. They ignored both, so a
client that asked for `?type=send_email` believed it watched one type's events and got every
job's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs.api.auth import issue_token

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

STREAMS = ["job-stream", "job-stream-v1"]
LIVE = [*STREAMS, "job-stream-status"]
UNKNOWN = ["Unknown query parameter."]
REPEATED = ["Given more than once: send one value."]


@pytest.fixture
def reader(viewer: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {issue_token(viewer)}")


@pytest.mark.parametrize("route", LIVE)
@pytest.mark.parametrize(
    "query",
    [
        # What a client might believe filters the stream, or resumes it.
        {"type": "send_email"},
        {"status": "failed"},
        {"queue": "emails"},
        {"lastEventId": "42"},
        {"last_event_id": "42"},
        {"format": "json"},
        {"no_such_parameter": "1", "other": ""},
    ],
)
def test_a_live_route_refuses_a_query_parameter_naming_it(reader, route, query):
    response = reader.get(reverse(route), query)
    error = assert_error(response, 400, "validation_error")
    assert error["details"] == dict.fromkeys(query, UNKNOWN)
    for name in query:
        assert name in error["message"]


@pytest.mark.parametrize("route", LIVE)
def test_a_repeated_parameter_is_named_as_repeated(reader, route):
    # As `ApiView` names it: one value per parameter is checked first.
    response = reader.get(f"{reverse(route)}?type=a&type=b&queue=emails")
    error = assert_error(response, 400, "validation_error")
    assert error["details"] == {"type": REPEATED}


@pytest.mark.parametrize("route", STREAMS)
def test_a_head_of_the_stream_is_refused_as_its_get(reader, route):
    response = reader.head(f"{reverse(route)}?type=send_email")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("route", LIVE)
def test_credentials_and_the_method_are_checked_before_the_parameters(reader, route):
    path = f"{reverse(route)}?type=a&type=b"
    assert_error(Client().get(path), 401, "not_authenticated")
    refused = reader.post(path)
    assert_error(refused, 405, "method_not_allowed")
    assert refused["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("route", STREAMS)
def test_the_stream_without_parameters_still_opens_and_ignores_last_event_id(reader, route):
    # EventSource's reconnect names the last event id in a header, never in the query.
    for headers in ({}, {"HTTP_LAST_EVENT_ID": "42"}):
        response = reader.get(reverse(route), **headers)
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream"
    assert reader.get(reverse("job-stream-status")).status_code == 200


def test_the_stream_the_console_opens_is_answered(viewer: Any) -> None:
    # The address the console's pages give htmx's sse extension, query string and all.
    browser = Client()
    browser.force_login(viewer)
    page = browser.get("/").content.decode()
    (address,) = re.findall(r'sse-connect="([^"]+)"', page)
    response = browser.get(address.replace("&amp;", "&"))
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/event-stream"


def test_the_document_says_the_live_routes_take_no_parameter_and_refuse_one() -> None:
    document = Client().get("/api-docs.json").json()
    for route in LIVE:
        item = document["paths"][reverse(route)]
        for operation in item.values():
            assert "parameters" not in operation
            assert "400" in operation["responses"]
        refusal = item["get"]["responses"]["400"]
        assert "query parameter" in refusal["description"]
        example = next(iter(refusal["content"]["application/json"]["examples"].values()))
        assert example["value"]["error"]["code"] == "validation_error"


@pytest.mark.parametrize("route", LIVE)
def test_more_query_fields_than_django_reads_is_400_not_500(reader, route):
    response = reader.get(reverse(route) + "?" + "&".join(["a=1"] * 1001))
    assert_error(response, 400, "validation_error")
