"""A process whose database lacks migrations of its code (a release's web process up before
its `migrate`, or one pointed at an empty database) answers 503 `unavailable` with
`Retry-After`, saying the database is not migrated, as it answers an outage: never a 500.
`/api/v1/health` reports what the schema lacks, in `/readyz`'s words.

The schema is taken back inside the test's transaction, which puts it back: a table or a
column renamed is what an API request meets when a migration that adds it has not run."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from jobs.api.errors import RETRY_AFTER_SECONDS
from tests.conftest import token_client

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"


def lose(statement: str) -> None:
    """Take part of the schema back, as a database whose migration has not run lacks it."""
    with connection.cursor() as cursor:
        cursor.execute(statement)


def request(send: Any, path: str) -> Any:
    # A failed statement spoils the transaction it ran in: each request gets a savepoint of
    # its own, undone after it, as it would run outside any transaction outside a test.
    with transaction.atomic():
        response = send(path)
        transaction.set_rollback(True)
    return response


def assert_not_migrated(response: Any) -> None:
    error = assert_error(response, 503, "unavailable")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert error["message"] == (
        "The database is not migrated for this version of the scheduler: it waits for "
        "`manage.py migrate`. Retry after the Retry-After seconds."
    )
    assert error["details"] == {}


def test_health_reports_the_migrations_the_schema_lacks_as_readyz_does():
    latest = MigrationRecorder.Migration.objects.filter(app="jobs").latest("id")
    latest.delete()
    lacks = (
        f"its schema lacks 1 migration of this code (jobs.{latest.name}): "
        "waiting for `manage.py migrate`"
    )
    health = Client().get("/api/v1/health")
    assert health.status_code == 503
    assert health["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert health.json() == {
        "database": lacks,
        "redis": "ok",
        "error": {
            "code": "unavailable",
            "message": "Not migrated: database.",
            "details": {"database": [lacks]},
        },
    }
    ready = Client().get("/readyz")
    assert (ready.status_code, ready.json()["database"]) == (503, lacks)


@pytest.mark.usefixtures("redis_down")
def test_health_names_each_problem_when_the_schema_lags_and_redis_is_down():
    MigrationRecorder.Migration.objects.filter(app="jobs").latest("id").delete()
    body = Client().get("/api/v1/health").json()
    assert body["error"]["message"] == "Not migrated: database. Unreachable: redis."
    assert set(body["error"]["details"]) == {"database", "redis"}


def test_an_api_request_meeting_a_missing_table_is_503_not_migrated(operator):
    client = token_client(operator)
    lose("ALTER TABLE api_tokens RENAME TO api_tokens_of_a_later_release")
    # The token's own statement meets it first, on every route that reads a token.
    for path in (JOBS, f"{JOBS}/stats", "/metrics"):
        assert_not_migrated(request(client.get, path))


def test_an_api_request_meeting_a_missing_column_is_503_not_migrated(operator_client):
    lose("ALTER TABLE jobs RENAME COLUMN priority TO priority_of_a_later_release")
    assert_not_migrated(request(operator_client.get, JOBS))


def test_a_console_page_meeting_a_missing_table_is_the_503_page(operator):
    browser = Client()
    browser.force_login(operator)
    lose("ALTER TABLE jobs RENAME TO jobs_of_a_later_release")
    response = request(browser.get, "/jobs")
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    # It said the scheduler could not reach its database, which answered.
    page = response.content.decode()
    assert "is not migrated for this version of the scheduler" in page
    assert "<code>manage.py migrate</code>" in page
    assert "cannot reach" not in page
