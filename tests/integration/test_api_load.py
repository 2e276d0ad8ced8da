"""A short run of benchmarks/api_load.py: 20 clients POSTing jobs to the production profile
(gunicorn, two uvicorn processes) whose pools have 4 connections each. Every request is
answered 201, and the server never holds more connections than its pools allow (without
the pool daphne held one per client, then ran out)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from benchmarks.api_load import ProductionServer, named, run_load
from jobs.models import Job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_20_clients_get_no_error_and_the_server_stays_within_its_pool(
    operator_client, operator, subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    token = operator_client._credentials["HTTP_AUTHORIZATION"].removeprefix("Bearer ")
    name = f"api-load-test-{uuid.uuid4().hex[:8]}"
    env = {
        **subprocess_env,
        "DATABASE_URL": named(subprocess_env["DATABASE_URL"], name),
        "DATABASE_POOL_MAX_SIZE": "4",
    }
    server = ProductionServer(env, tmp_path / "gunicorn.log", workers=2)
    try:
        report = run_load(
            port=server.port,
            token=token,
            clients=20,
            seconds=4,
            application_name=name,
            marker=name,
        )
    finally:
        server.stop()

    assert report.errors == 0, report.table()
    assert report.requests >= 20, report.table()
    assert 1 <= report.max_connections <= 2 * 4, report.table()
    assert Job.objects.filter(payload__load=name).count() == report.statuses[201]
