"""The same workload for every system: single and batch enqueue, drain, start latency.

A system is an adapter (the project, the bare-SQL floor, each peer) that knows how to
enqueue one job, start and stop its worker as users run it, and count finished jobs. The
measures below only use those verbs, so every system is measured the same way:

- single enqueue: one job per call (and per transaction), on one connection, up to
  `enqueue` jobs or `seconds`; the project and the floor take turns, in rounds within one
  process (`single_enqueue_in_turns`), each scored by its median round;
- batch enqueue: the system's own bulk call, `batch` jobs, when it has one;
- drain: `drain` jobs waiting, then one worker process started; jobs/s from the first poll
  that sees a finished job to the poll that sees them all (or `seconds` later);
- latency: on an idle worker, `probes` jobs one at a time; from `time.time()` just before
  the enqueue call to `time.time()` in the handler's first line (see probes.py).
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from benchmarks.probes import wait_start

POLL_SECONDS = 0.02
# After a probe started, the worker finishes it and goes idle before the next one.
PROBE_GAP_SECONDS = 0.02
WORKER_START_TIMEOUT = 90.0


@dataclass(frozen=True)
class Sizes:
    enqueue: int = 2_000
    batch: int = 20_000
    drain: int = 10_000
    probes: int = 200
    # Cap of each measure, so that a slow system (or a table of history) ends in time.
    seconds: float = 20.0
    http_seconds: float = 10.0
    http_clients: int = 20

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class System(Protocol):
    redis_url: str

    def prepare(self) -> None:
        """No jobs of the benchmark's left: each measure starts from the same table."""

    def enqueue_one(self) -> None: ...

    def enqueue_batch(self, count: int) -> bool:
        """Enqueue `count` jobs with the system's bulk call; False when it has none."""

    def enqueue_probe(self, payload: dict[str, Any]) -> None: ...

    def start_worker(self, variant: str) -> subprocess.Popen[bytes]: ...

    def finished(self) -> int:
        """Jobs finished since `prepare`."""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def stop_worker(process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def single_enqueue(system: System, sizes: Sizes) -> float:
    system.prepare()
    return _enqueue_one_by_one(system, sizes.enqueue, sizes.seconds)


def _enqueue_one_by_one(system: System, count: int, seconds: float) -> float:
    """Jobs/s of `count` single enqueues, or of as many as `seconds` allow."""
    started = time.perf_counter()
    deadline = started + seconds
    done = 0
    while done < count and time.perf_counter() < deadline:
        system.enqueue_one()
        done += 1
    return done / (time.perf_counter() - started)


# Rounds of the single enqueue taken in turns: on this kind of machine the rate of a loop
# of round trips drifts by a quarter within seconds (the host's load, the CPUs' wake-ups),
# so one pass of each system, one after the other, once gave the same code 0.52x and 0.87x
# of the floor.
SINGLE_ENQUEUE_ROUNDS = 5


def single_enqueue_in_turns(systems: dict[str, System], sizes: Sizes) -> dict[str, float]:
    """Each system's single-enqueue rate, the systems taking turns in rounds of
    `enqueue / SINGLE_ENQUEUE_ROUNDS` jobs: its median round, in jobs/s."""
    per_round = max(1, sizes.enqueue // SINGLE_ENQUEUE_ROUNDS)
    round_seconds = sizes.seconds / SINGLE_ENQUEUE_ROUNDS / len(systems)
    rates: dict[str, list[float]] = {label: [] for label in systems}
    for system in systems.values():
        system.prepare()
    for _ in range(SINGLE_ENQUEUE_ROUNDS):
        for label, system in systems.items():
            rates[label].append(_enqueue_one_by_one(system, per_round, round_seconds))
    return {label: statistics.median(rounds) for label, rounds in rates.items()}


def batch_enqueue(system: System, sizes: Sizes) -> float | None:
    system.prepare()
    started = time.perf_counter()
    if not system.enqueue_batch(sizes.batch):
        return None
    return sizes.batch / (time.perf_counter() - started)


def preload(system: System, count: int) -> None:
    if not system.enqueue_batch(count):
        for _ in range(count):
            system.enqueue_one()


def drain(system: System, sizes: Sizes, variant: str) -> float:
    system.prepare()
    preload(system, sizes.drain)
    process = system.start_worker(variant)
    try:
        start_deadline = time.monotonic() + WORKER_START_TIMEOUT
        idle_at = time.perf_counter()
        first = system.finished()
        while first == 0:
            if process.poll() is not None or time.monotonic() > start_deadline:
                raise RuntimeError(f"the worker ({variant}) finished no job: exit {process.poll()}")
            idle_at = time.perf_counter()
            time.sleep(POLL_SECONDS)
            first = system.finished()
        first_at = time.perf_counter()
        if first >= sizes.drain:
            # Every job finished between two polls: none had finished at `idle_at`, so the
            # whole drain fits in that window, and this rate is a lower bound.
            return first / (first_at - idle_at)
        deadline = first_at + sizes.seconds
        last, last_at = first, first_at
        while last < sizes.drain and last_at < deadline:
            time.sleep(POLL_SECONDS)
            last, last_at = system.finished(), time.perf_counter()
    finally:
        stop_worker(process)
    if last == first:
        raise RuntimeError(f"the worker ({variant}) finished no job in {sizes.seconds} s")
    return (last - first) / (last_at - first_at)


def latency(system: System, sizes: Sizes, variant: str) -> dict[str, float]:
    system.prepare()
    key = f"bench:probe:{uuid.uuid4().hex}"
    process = system.start_worker(variant)
    try:
        # The warm-up probe waits out the worker's start; then it is idle.
        system.enqueue_probe({"key": key, "n": -1})
        wait_start(system.redis_url, key, WORKER_START_TIMEOUT)
        time.sleep(0.5)
        waits: list[float] = []
        deadline = time.perf_counter() + sizes.seconds
        for n in range(sizes.probes):
            if time.perf_counter() > deadline:
                break
            before = time.time()
            system.enqueue_probe({"key": key, "n": n})
            started_n, started = wait_start(system.redis_url, key, 30.0)
            if started_n != n:
                raise RuntimeError(f"probe {started_n} started while waiting for probe {n}")
            waits.append((started - before) * 1000)
            time.sleep(PROBE_GAP_SECONDS)
    finally:
        stop_worker(process)
    return {
        "p50_ms": statistics.median(waits),
        "p99_ms": percentile(waits, 0.99),
        "max_ms": max(waits),
        "probes": len(waits),
    }


def measure(
    system: System, sizes: Sizes, variants: dict[str, str], *, single: bool = True
) -> dict[str, dict[str, Any]]:
    """Every measure; `variants` maps a row label to a worker variant ("defaults", "tuned").
    Enqueue figures do not depend on the worker, so they go to the first row only; without
    `single`, the single enqueue is left to `single_enqueue_in_turns`."""
    rows: dict[str, dict[str, Any]] = {}
    for index, (label, variant) in enumerate(variants.items()):
        row: dict[str, Any] = {}
        if index == 0:
            if single:
                row["single_enqueue"] = single_enqueue(system, sizes)
            row["batch_enqueue"] = batch_enqueue(system, sizes)
        row["drain"] = drain(system, sizes, variant)
        row["latency"] = latency(system, sizes, variant)
        rows[label] = row
    system.prepare()
    return rows
