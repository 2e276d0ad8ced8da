"""The database cut off, for everyone or for one worker, through a TCP proxy the test controls.

The machine's PostgreSQL itself is never touched: the proxy drops the connections that go
through it, which is what an outage looks like to its clients. Each job's handler appends
a line to a file (`count_run`), so a handler that ran twice shows however the attempts
were recorded.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt, Worker
from tests.faults.proxy import Proxy
from tests.handlers_app.handlers import counted_runs

from .conftest import FAST_WORKER_ENV, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Longer than the workers' timeout (FAST_WORKER_ENV) plus a rescuer interval: long enough
# for a worker that comes back first to declare the others dead, if silence during the
# outage counted.
OUTAGE_SECONDS = 3 * float(FAST_WORKER_ENV["SCHEDULER_WORKER_TIMEOUT"])


@pytest.fixture
def db_proxies(subprocess_env: dict[str, str]) -> Iterator[Callable[[], Proxy]]:
    """`db_proxies()` opens one more proxy to the test database."""
    db = connection.settings_dict
    host, port = db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)
    opened: list[Proxy] = []

    def open_proxy() -> Proxy:
        opened.append(Proxy(f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)))
        return opened[-1]

    yield open_proxy
    for proxy in opened:
        proxy.close()


def through(proxy: Proxy, env: dict[str, str]) -> dict[str, str]:
    db = connection.settings_dict
    user = db["USER"] or "postgres"
    return {**env, "DATABASE_URL": f"postgres://{user}@127.0.0.1:{proxy.port}/{db['NAME']}"}


def enqueue_counted(count: int, path: Path, seconds: float) -> list[dict[str, Any]]:
    """`count` jobs whose handler notes its start in `path` + ".started" and its end in `path`
    (`count_run`)."""
    payload = {"path": str(path), "started_path": f"{path}.started", "seconds": seconds}
    return [state.enqueue("count_run", payload) for _ in range(count)]


def started_in_workers(jobs: list[dict[str, Any]], path: Path) -> bool:
    """Whether every job's handler is running in its worker. A job is `processing` once its
    claim commits, before the worker has the claim's answer: a proxy cut in between (seen on
    a loaded machine) loses the answer, and the worker starts the job only once the database
    is back (ARCHITECTURE, "Failure model"), not during the outage."""
    return set(counted_runs(Path(f"{path}.started"))) == {job["id"] for job in jobs}


def all_completed(jobs: list[dict[str, Any]]) -> bool:
    return Job.objects.filter(id__in=[j["id"] for j in jobs], status="completed").count() == len(
        jobs
    )


def test_an_outage_for_everyone_longer_than_the_timeout_runs_each_job_once(
    start_worker, worker_env, db_proxies, tmp_path
):
    proxies = [db_proxies(), db_proxies()]
    workers = [start_worker("--concurrency", "4", env=through(p, worker_env)) for p in proxies]
    for worker in workers:
        worker.wait_registered()
    effects = tmp_path / "effects"
    # The handlers finish during the outage: their outcomes wait in the workers.
    jobs = enqueue_counted(8, effects, seconds=1.0)
    wait_for(lambda: started_in_workers(jobs, effects), what="all eight handlers to start")

    for proxy in proxies:
        proxy.cut()
    time.sleep(OUTAGE_SECONDS)
    restored_at = timezone.now()
    assert len(counted_runs(effects)) == 8, "the handlers ran during the outage"
    # Workers come back one after the other (their retries are not in step): the first
    # back must not take the silence of the outage for the other's death.
    proxies[0].restore()
    wait_for(lambda: workers[0].row().heartbeat_at > restored_at, what="the first to beat again")
    time.sleep(float(FAST_WORKER_ENV["SCHEDULER_WORKER_TIMEOUT"]) / 4)
    proxies[1].restore()

    wait_for(lambda: all_completed(jobs), timeout=20, what="every job to complete")
    assert counted_runs(effects) == {job["id"]: 1 for job in jobs}
    assert JobAttempt.objects.filter(job_id__in=[j["id"] for j in jobs]).count() == 8
    assert set(Worker.objects.values_list("status", flat=True)) == {"running"}
    logs = "".join(worker.logs() for worker in workers)
    assert "database unavailable" in logs and "refused" not in logs, logs


def test_a_worker_cut_off_alone_is_rescued_and_its_late_outcome_refused(
    start_worker, worker_env, db_proxies, tmp_path
):
    db_proxy = db_proxies()
    cut_off = start_worker("--concurrency", "1", env=through(db_proxy, worker_env))
    cut_off.wait_registered()
    effects = tmp_path / "effects"
    (job,) = enqueue_counted(1, effects, seconds=OUTAGE_SECONDS)
    wait_for(
        lambda: started_in_workers([job], effects),
        what="the job to start on the worker behind the proxy",
    )

    with db_proxy.cut_off():
        # Rescued after the timeout and run again by a worker that can see the database.
        rescuer = start_worker("--concurrency", "1")
        wait_for(lambda: all_completed([job]), timeout=60, what="the rescue")
        assert Job.objects.get(id=job["id"]).result == {"pid": rescuer.pid}
        assert cut_off.row().status == "dead"
        wait_for(lambda: counted_runs(effects)[job["id"]] == 2, timeout=OUTAGE_SECONDS)

    # Back on the network, its late success is refused, and it is alive again.
    wait_for(lambda: "refused" in cut_off.logs(), timeout=10, what="the late outcome")
    wait_for(lambda: cut_off.row().status == "running", what="the worker to beat again")
    attempts = JobAttempt.objects.filter(job_id=job["id"]).order_by("attempt_number")
    assert [(a.status, a.error_type) for a in attempts] == [
        ("failed", "WorkerLost"),
        ("succeeded", None),
    ]
    job_row = Job.objects.get(id=job["id"])
    assert job_row.status == "completed" and job_row.result == {"pid": rescuer.pid}


def test_a_stop_during_an_outage_keeps_to_the_grace_and_leaves_the_jobs_to_the_rescue(
    start_worker, worker_env, db_proxies, tmp_path
):
    db_proxy = db_proxies()
    worker = start_worker(
        "--concurrency",
        "2",
        env={**through(db_proxy, worker_env), "SCHEDULER_SHUTDOWN_GRACE": "1"},
    )
    worker.wait_registered()
    effects, gate = tmp_path / "effects", tmp_path / "gate"
    gated = {"path": str(effects), "started_path": f"{effects}.started", "gate_path": str(gate)}
    jobs = [state.enqueue("count_run", gated), *enqueue_counted(1, effects, seconds=60)]
    wait_for(lambda: started_in_workers(jobs, effects), what="both handlers to start")

    with db_proxy.cut_off():
        # One finishes during the outage (its outcome cannot be written), one outlasts the
        # grace.
        gate.touch()
        wait_for(lambda: counted_runs(effects), what="the gated handler to finish")
        worker.send(signal.SIGTERM)
        # Before, it waited for the database (or a second signal) to mark itself stopping,
        # then to return its jobs: a supervisor's stop ended in its kill timeout.
        assert worker.wait(timeout=30) == 1
    logs = worker.logs()
    assert "2 jobs left processing" in logs, logs
    # Nothing was lost: both still belong to the stopped worker, whose heartbeat has stopped,
    # for another worker's rescuer to return (tests of the rescue: test_worker_failures.py).
    held = Job.objects.filter(id__in=[j["id"] for j in jobs])
    assert {(j.status, j.worker_id) for j in held} == {("processing", worker.row().id)}
