"""A query parameter holding NUL, which no text in PostgreSQL can hold, is a 400 naming the
parameter on every surface (API, console, admin), never a 500 from a statement comparing
with it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/api/v1/jobs?type=a%00b", "type"),
        ("/api/v1/jobs?status=pending&queue=%00", "queue"),
        ("/api/v1/jobs/dlq?signature=a%00b", "signature"),
        ("/api/v1/schedules?type=a%00b", "type"),
        ("/api/v1/jobs?ty%00pe=x", "ty\\u0000pe"),
    ],
)
def test_the_api_answers_a_validation_error_naming_the_parameter(
    operator_client: Any, path: str, named: str
) -> None:
    response = operator_client.get(path)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["details"] == {named: ["Null characters are not allowed."]}


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/dlq?q=a%00b", "q"),
        ("/dlq?signature=a%00b", "signature"),
        ("/audit?username=a%00b", "username"),
        ("/audit?target=a%00b&action=x", "target"),
        ("/bulk/retry?scope=dlq&signature=a%00b", "signature"),
        ("/jobs?queue=a%00b", "queue"),
        ("/admin/jobs/job/?type=a%00b", "type"),
        ("/admin/jobs/job/?status__exact=a%00b", "status__exact"),
        ("/admin/jobs/worker/?hostname=a%00b", "hostname"),
    ],
)
def test_a_page_answers_400_naming_the_parameter(
    superuser_client: Client, path: str, named: str
) -> None:
    response = superuser_client.get(path)
    assert response.status_code == 400
    assert response.content.decode() == f"Null characters are not allowed in: {named}."


def test_a_query_without_nul_is_untouched(superuser_client: Client, operator_client: Any) -> None:
    assert superuser_client.get("/dlq?q=a%2500b").status_code == 200
    assert operator_client.get("/api/v1/jobs?type=noop").status_code == 200
