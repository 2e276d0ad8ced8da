"""While PostgreSQL cannot be reached, the API answers 503 `unavailable` and the console a page
saying so, both with `Retry-After`; once it is back, everything answers as before.

The outage is real but private to this test: the test's database connection goes through the
fault suite's TCP proxy (`tests.faults.proxy`). Cut, it breaks the open connection and every
new one, as an unreachable server does, without touching the machine's PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client

from jobs.api.errors import RETRY_AFTER_SECONDS
from jobs.models import Job
from tests.conftest import token_client
from tests.faults.proxy import Proxy

from .test_job_routes import assert_error

JOBS = "/api/v1/jobs"


@pytest.fixture
def database_proxy(transactional_db: None) -> Iterator[Proxy]:
    """This test's database connection, through a proxy that the test may cut and restore."""
    settings_dict = connection.settings_dict
    original = settings_dict["HOST"], settings_dict["PORT"]
    proxy = Proxy((original[0] or "127.0.0.1", int(original[1] or 5432)))
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    try:
        yield proxy
    finally:
        connection.close()
        settings_dict["HOST"], settings_dict["PORT"] = original
        proxy.close()


def back_up(proxy: Proxy) -> None:
    proxy.restore()
    # Django's handler drops a connection that failed at the start of the next request; the
    # test client skips that step, so it is taken here.
    close_old_connections()


def assert_unavailable(response: Any) -> None:
    error = assert_error(response, 503, "unavailable")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["X-Request-ID"]
    assert "unreachable" in error["message"]


def test_api_answers_503_while_the_database_is_down_and_recovers(database_proxy, operator):
    client = token_client(operator)
    assert client.get(JOBS).status_code == 200

    database_proxy.cut()
    assert_unavailable(client.get(JOBS))
    assert_unavailable(client.get(f"{JOBS}/stats"))
    assert_unavailable(
        client.post(JOBS, {"type": "noop", "payload": {}, "priority": 2}, format="json")
    )
    assert_unavailable(client.get(f"{JOBS}/00000000-0000-0000-0000-000000000000"))
    health = client.get("/api/v1/health")
    assert health.status_code == 503
    assert health.json()["database"].startswith("unreachable")
    ready = client.get("/readyz")
    assert (ready.status_code, ready["Retry-After"]) == (503, str(RETRY_AFTER_SECONDS))
    assert ready.json()["status"] == "unready"
    assert ready.json()["error"]["code"] == "unavailable"
    assert client.get("/healthz").status_code == 200

    back_up(database_proxy)
    created = client.post(JOBS, {"type": "noop", "payload": {}, "priority": 2}, format="json")
    assert created.status_code == 201
    assert Job.objects.filter(id=created.json()["id"]).exists()


def test_console_shows_a_503_page_while_the_database_is_down(database_proxy, operator):
    browser = Client()
    browser.force_login(operator)
    assert browser.get("/jobs").status_code == 200

    database_proxy.cut()
    for response in (
        browser.get("/jobs"),
        browser.get("/"),
        browser.post("/jobs/new", {"type": "noop", "payload": "{}", "priority": "2"}),
    ):
        assert response.status_code == 503
        assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
        assert "cannot reach its database" in response.content.decode()

    back_up(database_proxy)
    assert browser.get("/jobs").status_code == 200
