"""Where a job's time goes, in microseconds per job; prints Markdown.

    python -m benchmarks.profile [ENQUEUES] [JOBS] [--tuned]

Run by `make benchmark-profile` (`python -m benchmarks --profile`) on the benchmark's
database. Three parts, all on the product as it ships:

- enqueue: `jobs.state.enqueue()` ENQUEUES times, then `enqueue_many()` of ten times as
  many jobs, under cProfile, split into validation, the statement's round trips, decoding
  the job objects, the after-commit subscribers, and the rest;
- worker: a `runworker` subprocess drains JOBS no-op jobs while py-spy samples the thread
  holding the GIL (without pausing the process); the samples are split by the part of a
  job's life each thread serves (claim, run, complete, events, the loop's own work) and by
  layer (our Python, psycopg, redis-py), as shares of the process's CPU over the drain from
  /proc, beside the CPU of PostgreSQL's processes over the same drain: on two cores, the
  CPU a job costs both sides is what bounds the drain;
- server: `EXPLAIN ANALYZE` of the worker's claim of a batch of waiting jobs, of their
  completion, and of a claim of one job (an idle worker's, on the start latency's path)
  beside the bare-SQL floor's, each committed as a worker's are: the statement's execution,
  its writes of `jobs` and each of its triggers, the attempts' foreign key among them
  (checked at the statement here rather than at commit).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from benchmarks.floor import CLAIM as FLOOR_CLAIM
from benchmarks.floor import Floor
from benchmarks.probes import wait_start
from benchmarks.project import TUNED_FLAGS, Project
from benchmarks.workload import WORKER_START_TIMEOUT, stop_worker
from jobs import state
from jobs.queue_names import ALL_QUEUES
from jobs.sql import fetch, query

PY_SPY = Path(__file__).resolve().parent.parent / ".bench" / "peers" / "bin" / "py-spy"
RATE = 1000

# cProfile function names (file suffix, function) of the parts of creating jobs.
ENQUEUE_PARTS = [
    ("validate the job", "jobs/state.py", "_validate"),
    # psycopg sends a statement and waits for its result inside `Connection.wait`, whatever
    # runs it: Django's cursor, the server-binding one of the prepared statements
    # (`jobs.sql.fetch(prepared=True)`), or the pipeline of `enqueue_many` (whose cursors'
    # `execute` only queues the statement), and the COMMIT of a transaction.
    ("the INSERT statements and their commit (round trips)", "psycopg/connection.py", "wait"),
    ("decode the job object", "jobs/representation.py", "__init__"),
    ("after commit: job.created queued for the publisher", "jobs/events.py", "publish_batch"),
    ("after commit: stats.updated marked changed", "jobs/stats.py", "count_batch"),
    ("after commit: webhooks (subscriptions, cached)", "jobs/webhooks.py", "dispatch_batch"),
]


def profile_enqueue(count: int, batch: bool = False) -> list[tuple[str, float]]:
    """`count` jobs by `enqueue()` one at a time, or by one `enqueue_many()` when `batch`."""
    project = Project()
    project.prepare()
    project.enqueue_one()  # connections, caches and prepared scripts warm
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    if batch:
        state.enqueue_many(state.JobSpec("bench_noop", {}) for _ in range(count))
    else:
        for _ in range(count):
            state.enqueue("bench_noop", {})
    profiler.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    parts: list[tuple[str, float]] = []
    for label, filename, function in ENQUEUE_PARTS:
        seconds = sum(
            cumulative
            for (file, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.items()
            if file.endswith(filename) and name == function
        )
        parts.append((label, seconds / count * 1e6))
    rest = total / count * 1e6 - sum(us for _, us in parts)
    parts.append(("the rest (Python: parameters, Django's cursor, building the events)", rest))
    parts.append(("total per job (under cProfile, which adds its own cost)", total / count * 1e6))
    project.prepare()
    return parts


# The part of a job's life each of the worker's threads serves, by thread name (the names
# `worker/` and `jobs/` give their threads); frames under the after-commit notifier are
# events on any thread, and the loop's own claims (an idle worker's) are claims.
THREAD_STAGES = {
    "MainThread": "loop",
    "claimer": "claim",
    "completer": "complete",
    "event-publisher": "events",
    "stats": "events",
    "listener": "wake-up",
}
STAGES = ("claim", "run", "complete", "events", "loop", "wake-up", "other")
STAGE_LABELS = {
    "claim": "claim (the loop's and the claimer's)",
    "run": "run: handler threads (hand-off, context, the handler, its result)",
    "complete": "complete (the completer)",
    "events": "events (job.* and stats.updated to Redis)",
    "loop": "loop: scheduling, bookkeeping",
    "wake-up": "wake-up listener",
    "other": "maintenance units on threads of their own (the pruner)",
}
# The layer a sampled stack is in: the drivers' frames (psycopg, redis-py) or ours.
LAYERS = (("psycopg/", "psycopg"), ("redis/", "redis-py"))


def _function(frame: str) -> tuple[str, str]:
    """(function, file) of a py-spy frame, which reads "Class.method (path/file.py:line)"."""
    name, _, where = frame.partition(" (")
    return name.rsplit(".", 1)[-1], where.rpartition(":")[0]


def stage(thread: str, stack: list[str]) -> str:
    """The part of a job's life a sampled stack (outermost frame first) of `thread` serves."""
    frames = {_function(frame) for frame in stack}
    if ("deliver", "jobs/notifier.py") in frames:
        return "events"
    if ("claim", "jobs/state.py") in frames:
        return "claim"
    if thread.startswith("handler-"):
        return "run"
    return THREAD_STAGES.get(thread, "other")


def layer(stack: list[str]) -> str:
    text = ";".join(stack)
    return next((name for marker, name in LAYERS if marker in text), "Python")


def read_raw(path: Path) -> Counter[tuple[str, str]]:
    """py-spy's raw output (one `thread (tid): name;frame;...;frame count` line per distinct
    stack): samples per (stage, layer)."""
    samples: Counter[tuple[str, str]] = Counter()
    for line in path.read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        if not stack_text:
            continue
        thread, *stack = stack_text.split(";")
        name = thread.partition(": ")[2]
        samples[stage(name, stack), layer(stack)] += int(count)
    return samples


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU each live process of `pids` (its threads included) has used."""
    used = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except FileNotFoundError:
            continue  # ended: what it used since the last reading is not counted
        used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def server_processes() -> list[int]:
    """The PostgreSQL server's processes that work for the benchmark's database: its
    backends but this process's own, and the background ones (WAL writer, checkpointer,
    autovacuum)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE (datname = current_database() OR backend_type <> 'client backend')"
            " AND pid <> pg_backend_pid()"
        )
        return [pid for (pid,) in cursor.fetchall()]


def used_since(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds `pids` used since `before` (a process started since: all of its)."""
    return sum(now - before.get(pid, 0.0) for pid, now in cpu_seconds(pids).items())


def profile_worker(jobs: int, variant: str) -> tuple[list[tuple[str, float]], float]:
    """CPU per job of a `runworker` draining `jobs` no-op jobs: its threads' share by part
    (py-spy's samples of the thread holding the GIL), scaled to the process's CPU from
    /proc, and the CPU of PostgreSQL's processes beside it."""
    project = Project()
    project.prepare()
    key = "bench:profile"
    worker = project.start_worker(variant)
    raw = PY_SPY.parent.parent.parent / f"profile-worker-{variant}.txt"
    try:
        project.enqueue_probe({"key": key, "n": 0})
        wait_start(project.redis_url, key, WORKER_START_TIMEOUT)
        # Not blocking: py-spy's default pauses the process at every sample, which drained
        # a quarter as fast as without it.
        spy = subprocess.Popen(  # noqa: S603 - py-spy of .bench, fixed arguments
            [
                str(PY_SPY),
                "record",
                "--pid",
                str(worker.pid),
                "--nonblocking",
                "--gil",
                "--threads",
                "--rate",
                str(RATE),
                "--format",
                "raw",
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        worker_before = cpu_seconds([worker.pid])
        # The claimer's and the completer's connections open during the drain.
        server_before = cpu_seconds(server_processes())
        started = time.perf_counter()
        project.enqueue_batch(jobs)
        while project.finished() < jobs:
            time.sleep(0.02)
        drained = time.perf_counter()
        worker_cpu = used_since(worker_before, [worker.pid])
        server_cpu = used_since(server_before, list(set(server_before) | set(server_processes())))
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    finally:
        stop_worker(worker)
    samples = read_raw(raw)
    total = max(sum(samples.values()), 1)
    per_job = worker_cpu / jobs * 1e6
    layer_names = ("Python", *(label for _, label in LAYERS))
    parts = [
        (f"{STAGE_LABELS[part]}: {layer_name}", samples[part, layer_name] / total * per_job)
        for part in STAGES
        for layer_name in layer_names
        if samples[part, layer_name]
    ]
    parts += [
        ("the worker process, all threads (/proc)", per_job),
        (
            "PostgreSQL: the database's backends, the background processes (/proc)",
            server_cpu / jobs * 1e6,
        ),
    ]
    project.prepare()
    return parts, jobs / (drained - started)


# The claim size of the tuned worker (half its prefetch), and how many times each statement
# is explained: the medians are shown.
SERVER_BATCH = 250
SERVER_ROUNDS = 10
SINGLE_CLAIM_ROUNDS = 50

# (label, us per job), in the order a table shows them.
Parts = list[tuple[str, float]]


def plan_parts(explained: dict[str, Any], jobs: int) -> Parts:
    """us per job of one `EXPLAIN (ANALYZE, FORMAT JSON)` result: the statement's execution,
    each write of `jobs` in its plan (with the look-ups of the rows under it), each trigger.
    The parts overlap what the statement's execution holds and are not summed: a CTE's rows
    are timed under whichever node reads them first."""
    parts = [("the statement's execution", explained["Execution Time"])]
    nodes = [explained["Plan"]]
    while nodes:
        node = nodes.pop(0)
        if node["Node Type"] == "ModifyTable" and node.get("Relation Name") == "jobs":
            operation = node["Operation"].upper()
            parts.append((f"its {operation} of jobs", node["Actual Total Time"]))
        nodes += node.get("Plans", [])
    for trigger in explained.get("Triggers", []):
        name = trigger["Trigger Name"]
        if name.startswith("RI_ConstraintTrigger"):
            name = f"foreign-key check ({trigger['Relation']})"
        parts.append((f"trigger {name}", trigger["Time"]))
    return [(label, ms * 1000 / jobs) for label, ms in parts]


def _explain(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        explained: dict[str, Any] = cursor.fetchone()[0][0]
        return explained


def _medians(rounds: list[Parts]) -> Parts:
    """Each part's median over `rounds` (the same parts each round)."""
    return [
        (label, statistics.median(parts[i][1] for parts in rounds))
        for i, (label, _) in enumerate(rounds[0])
    ]


def drain_explained(ids: list[uuid.UUID], worker_id: uuid.UUID) -> tuple[Parts, Parts]:
    """The jobs `ids` claimed in one statement and completed in another, each explained and
    committed as a worker's are; the attempts' foreign key is checked at each statement
    rather than at commit, so that its check shows among the triggers."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        claim = _explain(
            query("claim_jobs"),
            {
                "worker_id": worker_id,
                "limit": len(ids),
                "job_ids": ids,
                **ALL_QUEUES.params(),
            },
        )
    with transaction.atomic():
        attempts = fetch("held_claims", {"job_ids": ids, "worker_id": worker_id})
        complete = _explain(
            query("complete_jobs"),
            {
                "job_ids": [row["id"] for row in attempts],
                "attempt_ids": [row["current_attempt_id"] for row in attempts],
                "finished_at": [timezone.now()] * len(attempts),
                "results": Jsonb([None] * len(attempts)),
                "worker_id": worker_id,
            },
        )
    return plan_parts(claim, len(ids)), plan_parts(complete, len(attempts))


def profile_server(batch: int) -> dict[str, Parts]:
    """The server's side of the worker's statements, explained (module docstring): the
    jobs of every round wait from the start, as a backlog does. (Grown round by round from
    an empty table, the statements' plans, the foreign key's among them, were made for a
    table of a few pages and kept: a scan of the whole table per attempt.)"""
    project = Project()
    project.prepare()
    backlog = SERVER_ROUNDS * batch + SINGLE_CLAIM_ROUNDS
    state.enqueue_many(state.JobSpec("bench_noop", {}) for _ in range(backlog))
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM jobs ORDER BY virtual_deadline, created_at, id")
        ids = [row[0] for row in cursor.fetchall()]
    worker_id = uuid.uuid4()
    claims: list[Parts] = []
    completions: list[Parts] = []
    for start in range(0, SERVER_ROUNDS * batch, batch):
        claimed, completed = drain_explained(ids[start : start + batch], worker_id)
        claims.append(claimed)
        completions.append(completed)
    singles = [drain_explained([job], worker_id)[0] for job in ids[SERVER_ROUNDS * batch :]]
    project.prepare()
    floor = Floor(os.environ["DATABASE_URL"], project.redis_url)
    floor_claims: list[Parts] = []
    try:
        floor.prepare()
        floor.enqueue_batch(backlog)
        for _ in range(SINGLE_CLAIM_ROUNDS):
            row = floor.connection.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + FLOOR_CLAIM, [1]
            ).fetchone()
            assert row is not None  # noqa: S101 - EXPLAIN returns its one row
            floor_claims.append(plan_parts(row[0][0], 1))
        floor.prepare()
    finally:
        floor.connection.close()
    return {
        f"a claim of {batch:,} jobs by the worker": _medians(claims),
        f"the completion of those {batch:,}": _medians(completions),
        "a claim of one job (an idle worker's)": _medians(singles),
        "the floor's claim of one job": _medians(floor_claims),
    }


def render(title: str, parts: list[tuple[str, float]]) -> list[str]:
    return [
        f"| {title} | µs per job |",
        "| --- | ---: |",
        *(f"| {label} | {us:,.0f} |" for label, us in parts),
        "",
    ]


def main(argv: list[str]) -> None:
    numbers = [int(arg) for arg in argv if arg.isdigit()]
    enqueues, jobs = (numbers + [1000, 5000][len(numbers) :])[:2]
    lines = render(f"`jobs.state.enqueue()`, {enqueues:,} calls", profile_enqueue(enqueues))
    batch = 10 * enqueues
    lines += render(
        f"`jobs.state.enqueue_many()`, {batch:,} jobs in one call", profile_enqueue(batch, True)
    )
    for title, parts in profile_server(SERVER_BATCH).items():
        lines += render(f"PostgreSQL's execution (EXPLAIN ANALYZE): {title}", parts)
    variants = ["defaults"] + (["tuned"] if "--tuned" in argv else [])
    for variant in variants:
        parts, rate = profile_worker(jobs, variant)
        flags = " ".join(TUNED_FLAGS) if variant == "tuned" else "no flags"
        lines += render(
            f"`runworker` ({flags}), {jobs:,} no-op jobs, {rate:,.0f} jobs/s while sampled, CPU",
            parts,
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
