"""Where a job's time goes, in microseconds per job; prints Markdown.

    python -m benchmarks.profile [ENQUEUES] [JOBS] [--tuned]

Run by `make benchmark-profile` (`python -m benchmarks --profile`) on the benchmark's
database. Two parts, both on the product as it ships:

- enqueue: `jobs.state.enqueue()` ENQUEUES times, then `enqueue_many()` of ten times as
  many jobs, under cProfile, split into validation, the statement's round trips, decoding
  the job objects, the after-commit subscribers, and the rest;
- worker: a `runworker` subprocess drains JOBS no-op jobs while py-spy samples all of its
  threads (idle included, so it is wall time); the loop thread's samples are split into
  claim, complete and events (each into waiting on PostgreSQL or Redis and Python), the
  handler threads' into running handlers, and the rest of the loop.
"""

from __future__ import annotations

import cProfile
import pstats
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.probes import wait_start
from benchmarks.project import TUNED_FLAGS, Project
from benchmarks.workload import WORKER_START_TIMEOUT, stop_worker
from jobs import state

PY_SPY = Path(__file__).resolve().parent.parent / ".bench" / "peers" / "bin" / "py-spy"
RATE = 500

# cProfile function names (file suffix, function) of the parts of creating jobs.
ENQUEUE_PARTS = [
    ("validate the job", "jobs/state.py", "_validate"),
    # psycopg's own execute: under Django's cursor, or under the server-binding one that
    # runs the prepared statements (`jobs.sql.fetch(prepared=True)`).
    ("the INSERT statement and its commit (round trips)", "psycopg/cursor.py", "execute"),
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


# Leaf functions of a thread that waits (in C: a lock, a queue, a socket, a sleep) rather
# than works. py-spy names frames "Class.method (path/file.py:line)".
WAITING = {"_serve", "_receive", "wait", "_wait_for_tstate_lock", "get", "select", "sleep"}


def _function(frame: str) -> str:
    return frame.split(" (")[0].rsplit(".", 1)[-1]


def bucket(stack: list[str]) -> str | None:
    """The part of a job's life a sampled stack (outermost first) belongs to; None for a
    thread other than the loop that is waiting."""
    text = ";".join(stack)
    waiting = _function(stack[-1]) in WAITING
    if "runworker.py" not in text:
        if waiting:
            return None
        if "processor.py" in text:
            return "run: handler threads (hand-off, context, the handler, its result)"
        return "other threads (listener, heartbeat) working"
    waiting_db = "psycopg/" in text or "_commit (" in text
    for frame in reversed(stack):
        function, in_file = _function(frame), frame.partition(" (")[2]
        if function == "deliver" and in_file.startswith("jobs/notifier.py"):
            return "events: Redis round trips" if "redis/" in text else "events: Python"
        if function in ("claim", "complete") and in_file.startswith("jobs/state.py"):
            return f"{function}: PostgreSQL round trips" if waiting_db else f"{function}: Python"
    if waiting:
        return "loop: waiting (for work, for handler threads)"
    return "loop: other Python (scheduling, bookkeeping)"


def read_raw(path: Path) -> tuple[Counter[str], int]:
    """py-spy's raw output (one `thread;frame;...;frame count` line per distinct stack):
    samples per part, and how many samples the loop thread got (its wall time)."""
    parts: Counter[str] = Counter()
    loop = 0
    for line in path.read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        if not stack_text:
            continue
        stack = stack_text.split(";")
        if "runworker.py" in stack_text:
            loop += int(count)
        part = bucket(stack)
        if part is not None:
            parts[part] += int(count)
    return parts, loop


def profile_worker(jobs: int, variant: str) -> tuple[list[tuple[str, float]], float]:
    project = Project()
    project.prepare()
    key = "bench:profile"
    worker = project.start_worker(variant)
    raw = PY_SPY.parent.parent.parent / f"profile-worker-{variant}.txt"
    try:
        project.enqueue_probe({"key": key, "n": 0})
        wait_start(project.redis_url, key, WORKER_START_TIMEOUT)
        spy = subprocess.Popen(  # noqa: S603 - py-spy of .bench, fixed arguments
            [
                str(PY_SPY),
                "record",
                "--pid",
                str(worker.pid),
                "--idle",
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
        recording = time.perf_counter()
        time.sleep(1.0)
        started = time.perf_counter()
        project.enqueue_batch(jobs)
        while project.finished() < jobs:
            time.sleep(0.02)
        drained = time.perf_counter()
        spy.send_signal(signal.SIGINT)
        window = time.perf_counter() - recording
        spy.wait(60)
    finally:
        stop_worker(worker)
    samples, loop = read_raw(raw)
    # py-spy falls behind its rate with many threads: scale by the loop thread's samples,
    # which cover the whole window.
    per_sample = window / max(loop, 1) / jobs * 1e6
    parts = sorted(((name, n * per_sample) for name, n in samples.items()), key=lambda p: -p[1])
    project.prepare()
    return parts, jobs / (drained - started)


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
    variants = ["defaults"] + (["tuned"] if "--tuned" in argv else [])
    for variant in variants:
        parts, rate = profile_worker(jobs, variant)
        flags = " ".join(TUNED_FLAGS) if variant == "tuned" else "no flags"
        lines += render(
            f"`runworker` ({flags}), {jobs:,} no-op jobs, {rate:,.0f} jobs/s while sampled,"
            " worker threads' wall time",
            parts,
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
