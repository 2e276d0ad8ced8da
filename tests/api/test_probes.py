"""/healthz (liveness) and /readyz (readiness), as a process manager or load balancer sees them.
The database outage case is in test_database_outage.py."""

from __future__ import annotations

import pytest
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from jobs.models import Worker as WorkerRow
from jobs.reconnect import DATABASE_ERRORS
from jobs.schema_version import SchemaBehind
from worker.worker import Worker

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_reading_anything(django_assert_num_queries):
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_is_ready_when_the_database_answers():
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "database": "ok", "redis": "ok"}


def test_readyz_is_unready_until_the_database_has_every_migration_of_this_code():
    # As a process of a new release meets a database its `migrate` has not reached yet
    # (the test's transaction puts the record back).
    latest = MigrationRecorder.Migration.objects.filter(app="jobs").latest("id")
    latest.delete()
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response["Retry-After"]
    body = response.json()
    assert (body["status"], body["error"]["message"]) == ("unready", "Not migrated: database.")
    assert body["database"] == (
        f"its schema lacks 1 migration of this code (jobs.{latest.name}): "
        "waiting for `manage.py migrate`"
    )
    # The worker waits for it, as for a database away, saying why; it registers nothing.
    worker = Worker(concurrency=1)
    try:
        with pytest.raises(SchemaBehind, match=f"jobs.{latest.name}"):
            worker._register()
    finally:
        worker.processor.stop()
    assert isinstance(SchemaBehind(), DATABASE_ERRORS)
    assert not WorkerRow.objects.exists()


@pytest.mark.usefixtures("redis_down")
def test_readyz_stays_ready_without_redis_and_says_so():
    response = Client().get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["database"]) == ("ready", "ok")
    assert body["redis"].startswith("unreachable")


def test_probes_answer_plain_http_when_https_is_enforced(settings):
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/api/v1/health").status_code == 301


def test_probes_only_read():
    assert Client().head("/readyz").status_code == 200
    # As a real client sends it, with CSRF checks on (the test client turns them off): the
    # CSRF middleware's HTML page came first. Every other method gets the 405 envelope.
    client = Client(enforce_csrf_checks=True)
    for path in ("/healthz", "/readyz"):
        for method in ("post", "put", "delete"):
            response = getattr(client, method)(path)
            error = assert_error(response, 405, "method_not_allowed")
            assert set(error) == {"code", "message", "details"}
            assert response["Allow"] == "GET, HEAD"
