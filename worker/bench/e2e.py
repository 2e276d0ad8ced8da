"""`manage.py benchmark --e2e`: no-op jobs through a real worker process, end to end.

Two figures, against the configured database (use one no other worker serves, or their
workers take part and the figures mean little; the run says so when it sees them):

- throughput: N no-op jobs enqueued in bulk, drained by ONE `runworker --once` process,
  with attempts recorded and events published. jobs/s = N / (last completion - first start).
- latency: jobs enqueued one at a time on an idle worker; enqueue-to-start = the job's
  `started_at` (its claim) - its `created_at` (before its INSERT), p50 and p99.

The benchmark's jobs, attempts and worker rows are deleted afterwards.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import Job, Worker, WorkerStatus


class Output(Protocol):
    def write(self, msg: str, /) -> Any: ...


MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
# Enough threads that a batch of no-ops never waits for a free one.
THROUGHPUT_CONCURRENCY = 250
TRICKLE_GAP_SECONDS = 0.01


def database_url() -> str:
    db = connection.settings_dict
    credentials = quote(db["USER"] or "postgres", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = quote(db["HOST"] or "127.0.0.1", safe="")
    return f"postgres://{credentials}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


def worker_env() -> dict[str, str]:
    """The environment of this process, pointed at the database it uses right now."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "SCHEDULER_EVENTS_CHANNEL": settings.SCHEDULER_EVENTS_CHANNEL,
        "LOG_LEVEL": "WARNING",
    }


# The benchmark's worker processes, so that only their rows are deleted afterwards.
_started_pids: list[int] = []


def start_worker(*args: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(  # noqa: S603 - our own manage.py, fixed arguments
        [sys.executable, MANAGE, "runworker", *args],
        env=worker_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _started_pids.append(process.pid)
    return process


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _bench_jobs(marker: str) -> Any:
    return Job.objects.filter(payload__bench=marker)


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"benchmark: timed out waiting for {what}")
        time.sleep(0.01)


def _finish(process: subprocess.Popen[bytes], what: str) -> None:
    _, err = process.communicate(timeout=600)
    if process.returncode != 0:
        raise RuntimeError(f"benchmark: {what} exited {process.returncode}:\n{err.decode()}")


def measure_throughput(marker: str, jobs: int) -> dict[str, float]:
    started = time.perf_counter()
    state.enqueue_many(state.JobSpec("noop", {"bench": marker}) for _ in range(jobs))
    enqueue_seconds = time.perf_counter() - started
    # What autovacuum does soon after a bulk load; without statistics the planner takes the
    # claim's by-id lookup for a scan of every claimable row.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs")

    wall = time.perf_counter()
    process = start_worker("--once", "--concurrency", str(THROUGHPUT_CONCURRENCY))
    _finish(process, "the draining worker")
    wall_seconds = time.perf_counter() - wall

    drained = _bench_jobs(marker).filter(status="completed")
    done = drained.count()
    if done != jobs:
        raise RuntimeError(f"benchmark: {done} of {jobs} jobs completed")
    first = drained.order_by("started_at").values_list("started_at", flat=True)[0]
    last = drained.order_by("-completed_at").values_list("completed_at", flat=True)[0]
    drain_seconds = (last - first).total_seconds()
    return {
        "jobs": jobs,
        "enqueue_per_second": jobs / enqueue_seconds,
        "drain_seconds": drain_seconds,
        "jobs_per_second": jobs / drain_seconds,
        "wall_seconds": wall_seconds,
    }


def measure_latency(marker: str, trickle: int) -> dict[str, float]:
    process = start_worker("--concurrency", "4")
    try:
        _wait(
            lambda: Worker.objects.filter(pid=process.pid, status=WorkerStatus.RUNNING).exists(),
            60,
            "the idle worker to start",
        )
        warm_up = state.enqueue("noop", {"bench": marker})
        _wait(
            lambda: _bench_jobs(marker).filter(id=warm_up["id"], status="completed").exists(),
            30,
            "the warm-up job",
        )
        ids = []
        for _ in range(trickle):
            ids.append(state.enqueue("noop", {"bench": marker})["id"])
            time.sleep(TRICKLE_GAP_SECONDS)
        _wait(
            lambda: _bench_jobs(marker).filter(id__in=ids, status="completed").count() == trickle,
            60,
            "the trickle jobs",
        )
    finally:
        process.send_signal(signal.SIGTERM)
    _finish(process, "the idle worker")
    latencies = [
        (started - created) / timedelta(milliseconds=1)
        for created, started in _bench_jobs(marker)
        .filter(id__in=ids)
        .values_list("created_at", "started_at")
    ]
    return {
        "jobs": trickle,
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies),
    }


def cleanup(marker: str, since: Any) -> None:
    bench_jobs = "SELECT id FROM jobs WHERE payload @> jsonb_build_object('bench', %s::text)"
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM job_logs WHERE job_id IN ({bench_jobs})", [marker])  # noqa: S608
        cursor.execute(f"DELETE FROM job_attempts WHERE job_id IN ({bench_jobs})", [marker])  # noqa: S608
        cursor.execute(f"DELETE FROM jobs WHERE id IN ({bench_jobs})", [marker])  # noqa: S608
        # A run leaves twice its job count in dead rows; back-to-back runs otherwise measure
        # the previous runs' garbage (seen: ~3,050 jobs/s before this vacuum, ~3,400 after).
        for table in ("jobs", "job_attempts", "job_logs"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    Worker.objects.filter(
        started_at__gte=since, pid__in=_started_pids, hostname=socket.gethostname()
    ).delete()
    _started_pids.clear()


def run(stdout: Output, jobs: int = 20_000, trickle: int = 200) -> dict[str, Any]:
    """Run both measurements, print them as a table, and return the figures."""
    marker = uuid.uuid4().hex
    since = timezone.now()
    others = Worker.objects.filter(
        status=WorkerStatus.RUNNING,
        heartbeat_at__gte=since - timedelta(seconds=settings.SCHEDULER_WORKER_TIMEOUT),
    ).count()
    if others:
        stdout.write(f"warning: {others} other live worker(s) on this database take part.\n")
    try:
        throughput = measure_throughput(marker, jobs)
        latency = measure_latency(marker, trickle)
    finally:
        cleanup(marker, since)
    stdout.write(render(throughput, latency))
    return {"throughput": throughput, "latency": latency}


def render(throughput: dict[str, float], latency: dict[str, float]) -> str:
    return "\n".join(
        [
            "End to end: no-op jobs, one worker process, attempts recorded, events published",
            "",
            "| measure | value | target |",
            "| --- | ---: | ---: |",
            f"| jobs drained | {throughput['jobs']:,.0f} | |",
            f"| throughput (jobs/s) | {throughput['jobs_per_second']:,.0f} | >= 3,000 |",
            f"| drain time (s) | {throughput['drain_seconds']:.2f} | |",
            f"| worker wall time incl. start-up (s) | {throughput['wall_seconds']:.2f} | |",
            f"| bulk enqueue (jobs/s) | {throughput['enqueue_per_second']:,.0f} | |",
            f"| latency probe jobs | {latency['jobs']:,.0f} | |",
            f"| enqueue-to-start p50 (ms) | {latency['p50_ms']:.2f} | < 5 |",
            f"| enqueue-to-start p99 (ms) | {latency['p99_ms']:.2f} | |",
            f"| enqueue-to-start max (ms) | {latency['max_ms']:.2f} | |",
            "",
        ]
    )
