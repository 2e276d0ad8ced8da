"""Job types whose payload is declared as a dataclass, a TypedDict or a pydantic model
(tests/handlers_app/handlers.py): the schema clients see and the errors they get."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.handlers_app.handlers import register_all

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"


@pytest.fixture(autouse=True)
def typed_handlers() -> Iterator[None]:
    # Other tests unregister the test handlers when they are done with them.
    register_all()
    yield


def post(client: APIClient, job_type: str, payload: Any) -> Any:
    return client.post(JOBS, {"type": job_type, "payload": payload, "priority": 2}, format="json")


@pytest.mark.parametrize(
    ("job_type", "payload", "details"),
    [
        (
            "typed_dataclass",
            {"url": "https://example.com/a.png", "size": {"height": 2}, "format": "gif"},
            {
                "payload.size.width": ["This field is required."],
                "payload.format": ["'gif' is not one of ['png', 'jpeg']"],
            },
        ),
        ("typed_dict", {"cc": ["x@example.com"]}, {"payload.to": ["This field is required."]}),
        (
            "typed_model",
            {"name": "q1", "rows": 0, "extra": 1},
            {
                "payload": ["Unknown field(s): extra."],
                "payload.rows": ["0 is less than the minimum of 1"],
            },
        ),
        # What only the model states (a validator) is refused in the same shape.
        (
            "typed_model",
            {"name": "q 1", "rows": 5},
            {"payload.name": ["Value error, no spaces in a report name"]},
        ),
    ],
)
def test_a_typed_payload_is_refused_field_by_field(
    operator_client: APIClient, job_type: str, payload: Any, details: dict[str, list[str]]
) -> None:
    error = assert_error(post(operator_client, job_type, payload), 400, "validation_error")
    assert error["details"] == details


def test_a_typed_payload_is_stored_as_sent(operator_client: APIClient) -> None:
    payload = {"url": "https://example.com/a.png", "size": {"width": 640}}
    response = post(operator_client, "typed_dataclass", payload)
    assert response.status_code == 201, response.content
    assert response.json()["payload"] == payload


def test_the_derived_schema_is_in_openapi_and_on_the_new_job_form(
    operator_client: APIClient, client: Any, operator: Any
) -> None:
    document = json.loads(APIClient().get("/api-docs.json").content)
    branches = {
        branch["title"]: branch["properties"]["payload"]
        for branch in document["components"]["schemas"]["JobCreateRequest"]["oneOf"]
    }
    resize = branches["typed_dataclass"]
    assert resize["required"] == ["url", "size"]
    assert resize["properties"]["size"]["properties"]["width"]["type"] == "integer"
    assert branches["typed_dict"]["properties"]["cc"]["items"] == {"type": "string"}
    assert branches["typed_model"]["properties"]["rows"]["maximum"] == 1000
    client.force_login(operator)
    page = client.get("/jobs/new").content.decode()
    assert "typed_model" in page and "no spaces" not in page
    assert "&quot;maximum&quot;: 1000" in page or '"maximum": 1000' in page
