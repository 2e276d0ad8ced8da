"""The OpenAPI document covers the live event routes (plain Django views, which
drf-spectacular does not see) and the response headers clients rely on: `X-Request-ID` on
every answer, `Retry-After` on every 429 and 503. What it says is what the server answers."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from drf_spectacular.validation import validate_schema

from jobs.api.auth import issue_token

pytestmark = pytest.mark.django_db

ERROR_REF = "#/components/schemas/Error"
REQUEST_ID_REF = "#/components/headers/X-Request-ID"
RETRY_AFTER_REF = "#/components/headers/Retry-After"
STREAMS = ["job-stream", "job-stream-v1"]


@pytest.fixture(scope="module")
def document():
    # Served without credentials or the database.
    response = Client().get("/api-docs.json")
    assert response.status_code == 200
    return response.json()


def responses_of(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                yield f"{method.upper()} {path} {status}", status, response


def test_the_document_stays_valid(document):
    validate_schema(document)


@pytest.mark.parametrize("route", STREAMS)
def test_the_stream_is_documented_for_get_and_head(document, route):
    item = document["paths"][reverse(route)]
    assert set(item) == {"get", "head"}
    get, head = item["get"], item["head"]
    assert get["operationId"] != head["operationId"]
    for operation in (get, head):
        assert operation["security"] == [{"bearerAuth": []}, {"cookieAuth": []}]
        assert "parameters" not in operation
    assert set(get["responses"]["200"]["content"]) == {"text/event-stream"}
    # HEAD answers GET's headers and no body.
    assert set(head["responses"]) == set(get["responses"])
    assert all("content" not in response for response in head["responses"].values())
    for status in ("401", "429", "500", "503"):
        schema = get["responses"][status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": ERROR_REF}
    assert "WWW-Authenticate" in get["responses"]["401"]["headers"]
    # Another method is a 405 with `Allow`, said in words: no GET or HEAD ever gets one.
    assert "405" in get["description"] and "Allow" in get["description"]


def test_the_stream_status_is_documented_as_served(document, operator):
    get = document["paths"][reverse("job-stream-status")]["get"]
    assert get["security"] == [{"bearerAuth": []}, {"cookieAuth": []}]
    assert get["responses"]["401"]["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}
    documented = get["responses"]["200"]["content"]["application/json"]["schema"]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {issue_token(operator)}")
    served = client.get(reverse("job-stream-status"))
    assert served.status_code == 200
    assert set(served.json()) == set(documented["properties"]) == set(documented["required"])


def test_every_response_names_its_request_id(document):
    header = document["components"]["headers"]["X-Request-ID"]
    assert header["required"] is True
    missing = [
        name
        for name, _, response in responses_of(document)
        if response.get("headers", {}).get("X-Request-ID") != {"$ref": REQUEST_ID_REF}
    ]
    assert missing == []


def test_every_429_and_503_names_retry_after(document):
    assert document["components"]["headers"]["Retry-After"]["schema"] == {
        "type": "integer",
        "minimum": 1,
    }
    answers = [(name, response) for name, status, response in responses_of(document)]
    waits = [(name, response) for name, response in answers if name.endswith((" 429", " 503"))]
    assert any(name.startswith("GET /api/v1/health ") for name, _ in waits)
    assert any(name.startswith("GET /api/v1/jobs/stream ") for name, _ in waits)
    missing = [
        name
        for name, response in waits
        if response["headers"].get("Retry-After") != {"$ref": RETRY_AFTER_REF}
    ]
    assert missing == []


def test_a_created_job_names_its_location(document):
    created = document["paths"]["/api/v1/jobs"]["post"]["responses"]["201"]
    assert created["headers"]["Location"]["schema"] == {"type": "string", "format": "uri"}


@pytest.mark.parametrize("offered", [None, "client-id:42.a_b-c"])
def test_the_request_id_the_server_sends_is_the_documented_one(document, operator, offered):
    pattern = document["components"]["headers"]["X-Request-ID"]["schema"]["pattern"]
    headers = {} if offered is None else {"HTTP_X_REQUEST_ID": offered}
    client = Client(HTTP_AUTHORIZATION=f"Bearer {issue_token(operator)}", **headers)
    for route in STREAMS:
        for method in (client.get, client.head):
            answer = method(reverse(route))
            assert answer.status_code == 200
            assert answer["Content-Type"] == "text/event-stream"
            assert re.fullmatch(pattern, answer["X-Request-ID"])
            if offered is not None:
                assert answer["X-Request-ID"] == offered
    refused = Client().get(reverse("job-stream-v1"))
    assert refused.status_code == 401
    assert re.fullmatch(pattern, refused["X-Request-ID"])
