"""The project measured as it ships, on the database in DATABASE_URL; prints JSON.

    python -m benchmarks.project SIZES_JSON [--measure [--tuned] [--http] | --hot]
                                            [--pages] [--prune]

`--measure`: the side-by-side figures (with `--tuned` the tuned worker too, with `--http`
HTTP enqueue), the single enqueue taken in turns with the bare-SQL floor's (its rate under
"floor_single_enqueue"); `--hot`: only the hot path the volume table compares (single
enqueue, drain, latency at the defaults); `--pages`: the pages' server time; `--prune`: the
drain while pruning.

The jobs are the benchmark app's `bench_noop` / `bench_probe`, registered like a user's
(SCHEDULER_EXTRA_APPS=benchmarks); enqueue is `jobs.state.enqueue()` / `enqueue_many()`;
the worker is `manage.py runworker` with no flags ("defaults") or with TUNED_FLAGS; HTTP
goes to the production profile (gunicorn + uvicorn) as `make prod` starts it; pages are
timed in-process with Django's test client (server time: middleware, views, queries and
templates, no network).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count, QuerySet  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmarks.api_load import ProductionServer, post_jobs  # noqa: E402
from benchmarks.floor import Floor  # noqa: E402
from benchmarks.table import DEFAULTS, FLOOR  # noqa: E402
from benchmarks.workload import (  # noqa: E402
    POLL_SECONDS,
    Sizes,
    drain,
    latency,
    measure,
    percentile,
    single_enqueue,
    single_enqueue_in_turns,
    stop_worker,
)
from jobs import state, stats  # noqa: E402
from jobs.api.auth import issue_token  # noqa: E402
from jobs.api.pagination import encode_cursor  # noqa: E402
from jobs.filters import DEFAULT_ORDERING, list_order  # noqa: E402
from jobs.models import Job  # noqa: E402
from jobs.roles import Role, assign_role  # noqa: E402

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
# Many short jobs: each claim (and so each completion) carries up to the claim batch (250, half
# the prefetch) instead of about 100 (README, "The worker").
TUNED_FLAGS = ["--prefetch", "500"]
BENCH_TYPES = ("bench_noop", "bench_probe")
PAGE_REQUESTS = 20
HTTP_WARM_UP_SECONDS = 3.0


class Project:
    redis_url = settings.REDIS_URL
    # Completed jobs as the counters stood at the end of `prepare`.
    _completed_before = 0

    def prepare(self) -> None:
        jobs = "SELECT id FROM jobs WHERE type IN ('bench_noop', 'bench_probe')"
        with connection.cursor() as cursor:
            for table in ("job_logs", "job_attempts", "job_dependencies"):
                cursor.execute(f"DELETE FROM {table} WHERE job_id IN ({jobs})")  # noqa: S608
            cursor.execute(f"DELETE FROM jobs WHERE id IN ({jobs})")  # noqa: S608
            # The dead rows of the last measure would be the next one's garbage.
            cursor.execute("VACUUM jobs, job_attempts, job_logs")
        self._completed_before = stats.current_stats()["completed"]

    def enqueue_one(self) -> None:
        state.enqueue("bench_noop", {})

    def enqueue_probe(self, payload: dict[str, Any]) -> None:
        state.enqueue("bench_probe", payload)

    def enqueue_batch(self, count: int) -> bool:
        state.enqueue_many(state.JobSpec("bench_noop", {}) for _ in range(count))
        return True

    def start_worker(self, variant: str) -> subprocess.Popen[bytes]:
        flags = TUNED_FLAGS if variant == "tuned" else []
        return subprocess.Popen(  # noqa: S603 - our own manage.py, fixed arguments
            [sys.executable, MANAGE, "runworker", *flags], stdout=subprocess.DEVNULL
        )

    def finished(self, since: datetime | None = None) -> int:
        """Jobs completed since `prepare`, read from the job counters, as `/jobs/stats` reads
        them: polled every 20 ms during a drain, a count of the completed rows cost the
        database 12 us of CPU per drained job (6% of the drain's own), where Huey's and
        Celery's polls cost theirs next to nothing (lengths of Redis lists).
        With `since`, the benchmark jobs created from then on that completed: one round's
        while the pruner deletes older ones (which the counters would subtract), a range of
        `jobs_type_idx` however many earlier rounds left theirs."""
        if since is None:
            return stats.current_stats()["completed"] - self._completed_before
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM jobs WHERE type = 'bench_noop' AND status = 'completed'"
                " AND created_at >= coalesce(%s, '-infinity'::timestamptz)",
                [since],
            )
            return int(cursor.fetchone()[0])


def operator_token() -> str:
    user, _ = get_user_model().objects.get_or_create(username="bench-operator")
    assign_role(user, Role.OPERATOR)
    return issue_token(user)


def http_enqueue(sizes: Sizes) -> dict[str, float]:
    """`sizes.http_clients` clients POST /api/v1/jobs back to back for `http_seconds`, to
    the production profile (gunicorn with two uvicorn workers, as `make prod` runs it)."""
    project = Project()
    project.prepare()
    token = operator_token()
    log = Path(tempfile.mkdtemp(prefix="bench-http-")) / "gunicorn.log"
    server = ProductionServer(os.environ, log, workers=2)
    job = {"type": "bench_noop", "payload": {}, "priority": 2}
    try:
        # A server in production runs warm: its first requests open the pools' connections
        # (one at start, up to DATABASE_POOL_MAX_SIZE under load) and prepare the hot
        # statements on each, and its first seconds answered a fifth fewer requests. Its
        # answers are not timed, but an error among them counts.
        warm_up = post_jobs(
            port=server.port,
            token=token,
            clients=sizes.http_clients,
            seconds=HTTP_WARM_UP_SECONDS,
            job=job,
        )
        started = time.perf_counter()
        outcomes = post_jobs(
            port=server.port,
            token=token,
            clients=sizes.http_clients,
            seconds=sizes.http_seconds,
            job=job,
        )
        elapsed = time.perf_counter() - started
    finally:
        server.stop()
    project.prepare()
    timings = outcomes.latencies_ms
    return {
        "requests": len(timings),
        "per_s": len(timings) / elapsed,
        "errors": sum(len(run.latencies_ms) - run.statuses[201] for run in (warm_up, outcomes)),
        "p50_ms": statistics.median(timings),
        "p99_ms": percentile(timings, 0.99),
    }


def page_times() -> dict[str, dict[str, Any]]:
    """Server time of the API, console and admin pages over whatever the table holds: the
    API's lists first, filtered, and at several depths (a numbered page, and cursors from
    the first page down to the last), the console's and the admin's pages."""
    token = operator_token()
    api = Client(headers={"Authorization": f"Bearer {token}"})
    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    browser = Client()
    browser.force_login(user)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'jobs'")
        estimated = max(0, int(cursor.fetchone()[0]))
    deep = max(1, min(2000, estimated // 50))
    emails = Job.objects.filter(type="send_email")
    largest = (
        Job.objects.filter(in_dlq=True)
        .values("error_signature")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("error_signature", flat=True)
        .first()
    )
    cursor_list = "/api/v1/jobs?limit=50&cursor="
    pages = {
        "api_list": (api, "/api/v1/jobs?limit=20"),
        "api_type": (api, "/api/v1/jobs?type=send_email&limit=20"),
        "api_status": (api, "/api/v1/jobs?status=dlq&limit=20"),
        "api_status_retrying": (api, "/api/v1/jobs?status=failed&limit=20"),
        "api_status_pending": (api, "/api/v1/jobs?status=pending&limit=20"),
        "api_deep": (api, f"/api/v1/jobs?page={deep}&limit=50"),
        "api_cursor": (api, cursor_list + cursor_at((deep - 1) * 50)),
        "api_cursor_middle": (api, cursor_list + cursor_at(estimated // 2)),
        "api_cursor_last": (api, cursor_list + cursor_at(max(0, estimated - 50))),
        "api_type_cursor_middle": (
            api,
            "/api/v1/jobs?type=send_email&limit=50&cursor="
            + cursor_at(emails.count() // 2, emails),
        ),
        "api_sort_priority": (api, "/api/v1/jobs?ordering=priority&limit=20"),
        "api_sort_attempts": (api, "/api/v1/jobs?ordering=-attempt_count&limit=20"),
        "api_sort_deadline": (api, "/api/v1/jobs?ordering=virtual_deadline&limit=20"),
        "api_sort_cursor_middle": (
            api,
            "/api/v1/jobs?ordering=-priority&limit=50&cursor="
            + cursor_at(estimated // 2, ordering="-priority"),
        ),
        "api_stats": (api, "/api/v1/jobs/stats"),
        "dashboard": (browser, "/"),
        "dlq": (browser, "/dlq"),
        "dlq_group": (browser, "/dlq?" + urlencode({"signature": largest or ""})),
        "ledger": (browser, "/jobs"),
        "ledger_dlq": (browser, "/jobs?status=dlq"),
        "admin_jobs": (browser, "/admin/jobs/job/"),
        "admin_dlq": (browser, "/admin/jobs/deadletterjob/"),
        # The fifth column, priority.
        "admin_by_priority": (browser, "/admin/jobs/job/?o=4"),
    }
    figures: dict[str, dict[str, Any]] = {"counters": counters_read()}
    for name, (client, url) in pages.items():
        status = client.get(url).status_code  # warm-up: caches, first query plans
        times = []
        for _ in range(PAGE_REQUESTS):
            before = time.perf_counter()
            status = client.get(url).status_code
            times.append((time.perf_counter() - before) * 1000)
        if status != 200:
            raise RuntimeError(f"{url} answered {status}")
        figures[name] = {
            "p50_ms": statistics.median(times),
            "p95_ms": percentile(times, 0.95),
            "status": status,
            "url": url,
        }
    return figures


def cursor_at(
    depth: int, jobs: QuerySet[Job] | None = None, ordering: str = DEFAULT_ORDERING
) -> str:
    """The cursor a client walking `next` links holds at `depth` rows into the list in
    `ordering` (of `jobs`, a filtered list, when given)."""
    order = tuple(list_order([ordering]))
    listed = Job.objects.all() if jobs is None else jobs
    row = listed.order_by(*order)[depth : depth + 1].first()
    return "first" if row is None else encode_cursor(row, order)


def counters_read() -> dict[str, Any]:
    """What every stats.updated event, the Dashboard cards and /jobs/stats pay to read."""
    stats.current_stats()
    times = []
    for _ in range(PAGE_REQUESTS * 5):
        before = time.perf_counter()
        stats.current_stats()
        times.append((time.perf_counter() - before) * 1000)
    return {"p50_ms": statistics.median(times), "p95_ms": percentile(times, 0.95)}


def prunable_retention(share: float) -> float:
    """The retention, in seconds, past which the oldest `share` of the finished history is."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM now() - percentile_disc(%s) WITHIN GROUP"
            " (ORDER BY completed_at)) FROM jobs WHERE status = 'completed'",
            [share],
        )
        return float(cursor.fetchone()[0])


def past_retention(retention: float) -> int:
    """The finished jobs a pruner with `retention` (seconds) deletes: what it has to do."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM jobs WHERE (status = 'completed' AND completed_at < %s)"
            " OR cancelled_at < %s",
            [timezone.now() - timedelta(seconds=retention)] * 2,
        )
        return int(cursor.fetchone()[0])


def drain_rounds(project: Project, sizes: Sizes, retention: float, target: int) -> dict[str, Any]:
    """Rounds of `sizes.drain` jobs through one default worker that also runs its pruner with
    `retention`: three rounds when it prunes nothing, else rounds until it pruned `target`
    jobs, all it has to do, so that every round but the last overlaps pruning (or until
    `sizes.seconds` x 30 pass). A round still unfinished after `sizes.seconds` x 3 is a
    stalled worker: it ends the rounds, and is reported as its rate so far."""
    project.prepare()
    os.environ["SCHEDULER_RETAIN_COMPLETED"] = str(retention)
    before = stats.current_stats()["total"]
    process = project.start_worker("defaults")
    rates: list[float] = []
    stalled = False
    enqueued = 0
    started = time.perf_counter()
    deadline = started + sizes.seconds * (30 if retention else 10)
    try:
        while time.perf_counter() < deadline and not stalled:
            since = timezone.now()
            round_started = time.perf_counter()
            state.enqueue_many(state.JobSpec("bench_noop", {}) for _ in range(sizes.drain))
            enqueued += sizes.drain
            while (drained := project.finished(since)) < sizes.drain:
                if process.poll() is not None:
                    raise RuntimeError(f"the worker stopped: exit {process.poll()}")
                if time.perf_counter() - round_started > sizes.seconds * 3:
                    stalled = True
                    break
                time.sleep(POLL_SECONDS)
            rates.append(drained / (time.perf_counter() - round_started))
            # What the rounds added stays (it is newer than the retention): the rest is pruned.
            pruned = before + enqueued - stats.current_stats()["total"]
            if (retention == 0 and len(rates) >= 3) or (retention and pruned >= target):
                break
    finally:
        stop_worker(process)
        os.environ["SCHEDULER_RETAIN_COMPLETED"] = "0"
    elapsed = time.perf_counter() - started
    pruned = before + enqueued - stats.current_stats()["total"]
    return {
        "drain": statistics.median(rates),
        "slowest": min(rates),
        "rounds": len(rates),
        "stalled": stalled,
        "pruned": pruned,
        "pruned_per_s": pruned / elapsed,
        "seconds": elapsed,
    }


def while_pruning(project: Project, sizes: Sizes) -> dict[str, Any]:
    """Drain rounds without pruning, then while the worker prunes the oldest tenth of the
    finished history. The rounds stop when it is all pruned: stopping at a tenth of every
    job (the DLQ and the scheduled ones too) waited for more than the pruner had to do, and
    the pruner sat idle through most of the rounds."""
    retention = prunable_retention(0.1)
    return {
        "steady": drain_rounds(project, sizes, 0, 0),
        "pruning": drain_rounds(project, sizes, retention, past_retention(retention)),
    }


def main(argv: list[str]) -> dict[str, Any]:
    sizes = Sizes(**json.loads(argv[0]))
    project = Project()
    result: dict[str, Any] = {}
    if "--hot" in argv:
        # What the volume issue compares over history, in bounded time.
        result["rows"] = {
            DEFAULTS: {
                "single_enqueue": single_enqueue(project, sizes),
                "drain": drain(project, sizes, "defaults"),
                "latency": latency(project, sizes, "defaults"),
            }
        }
    elif "--measure" in argv:
        variants = {DEFAULTS: "defaults"}
        if "--tuned" in argv:
            variants[f"project, tuned ({' '.join(TUNED_FLAGS)})"] = "tuned"
        result["rows"] = measure(project, sizes, variants, single=False)
        floor = Floor(os.environ["DATABASE_URL"], project.redis_url)
        single = single_enqueue_in_turns({FLOOR: floor, DEFAULTS: project}, sizes)
        result["rows"][DEFAULTS]["single_enqueue"] = single[DEFAULTS]
        result["floor_single_enqueue"] = single[FLOOR]
        if "--http" in argv:
            result["rows"][DEFAULTS]["http"] = http_enqueue(sizes)
    if "--pages" in argv:
        project.prepare()
        result["pages"] = page_times()
    if "--prune" in argv:
        result["pruning"] = while_pruning(project, sizes)
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
