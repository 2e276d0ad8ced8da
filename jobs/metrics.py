"""Prometheus metrics (GET /metrics), read from PostgreSQL at each scrape.

Nothing is counted in a process's memory: the database's triggers append what each
statement did to `job_metrics` in the statement's own transaction (`schema.sql`), the job
counters come from `job_counts`, workers from their heartbeats. So every web process
answers the same figures, covering every worker, and a restarted process loses nothing
(prometheus-client's multiprocess files would cover only the processes of one host).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from typing import Any

from django.conf import settings
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from .retention import last_prune
from .sql import fetch
from .stats import COUNTERS, current_stats_by_queue

# A reader that sums more rows than this folds them, as the job counters' readers do.
_FOLD_ABOVE = 2_000

# name in `job_metrics` -> (metric, help), for the counters by type and queue.
_JOB_COUNTERS = {
    "created": ("scheduler_jobs_created", "Jobs created."),
    "completed": ("scheduler_jobs_completed", "Jobs completed."),
    "failed": ("scheduler_jobs_failed", "Attempts that ended without success."),
    "retried": ("scheduler_jobs_retried", "Failed attempts followed by another attempt."),
    "dead_lettered": ("scheduler_jobs_dead_lettered", "Jobs that entered the dead-letter queue."),
    "dlq_retried": ("scheduler_jobs_dlq_retried", "Dead-letter jobs given new attempts."),
    "cancelled": ("scheduler_jobs_cancelled", "Jobs cancelled."),
}
_HISTOGRAMS = {
    "wait_seconds": (
        "scheduler_job_wait_seconds",
        "From when a job was due (created, scheduled or retry time) to its claim.",
        ["type", "queue"],
    ),
    "run_seconds": (
        "scheduler_job_run_seconds",
        "How long an attempt ran, by outcome (succeeded, failed, cancelled).",
        ["type", "queue", "outcome"],
    ),
}
_PRUNE = {
    "prune_runs": ("scheduler_prune_runs", "Pruner passes (one worker at a time)."),
    "pruned_jobs": ("scheduler_pruned_jobs", "Jobs deleted by the pruner."),
}


def fold() -> int:
    """Collapse the appended metric rows into one per series; how many were folded."""
    return int(fetch("fold_job_metrics", {})[0]["folded"])


@cache
def _buckets() -> tuple[float, ...]:
    return tuple(float(b) for b in fetch("metric_buckets", {})[0]["buckets"])


def _rows() -> list[dict[str, Any]]:
    rows = fetch("job_metrics", {})
    if sum(row["summed"] for row in rows) > _FOLD_ABOVE:
        fold()
    return rows


class SchedulerCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        rows = _rows()
        yield from _counters(rows)
        yield from _histograms(rows)
        yield _states()
        yield from _workers()
        yield from _prune(rows)


def _counters(rows: list[dict[str, Any]]) -> Iterator[Metric]:
    families = {
        name: CounterMetricFamily(metric, doc, labels=["type", "queue"])
        for name, (metric, doc) in _JOB_COUNTERS.items()
    }
    for row in rows:
        if row["name"] in families:
            families[row["name"]].add_metric([row["type"], row["queue"]], row["n"])
    yield from families.values()


def _histograms(rows: list[dict[str, Any]]) -> Iterator[Metric]:
    bounds = (*_buckets(), math.inf)
    for name, (metric, doc, labels) in _HISTOGRAMS.items():
        family = HistogramMetricFamily(metric, doc, labels=labels)
        per_bucket: dict[tuple[str, ...], dict[float, int]] = defaultdict(dict)
        sums: dict[tuple[str, ...], float] = defaultdict(float)
        for row in rows:
            if row["name"] == name:
                key = (row["type"], row["queue"], row["label"])[: len(labels)]
                per_bucket[key][row["le"]] = per_bucket[key].get(row["le"], 0) + row["n"]
                sums[key] += row["total"]
        for key, counts in per_bucket.items():
            cumulative, buckets = 0, []
            for bound in bounds:
                cumulative += counts.get(bound, 0)
                buckets.append(("+Inf" if bound == math.inf else repr(bound), cumulative))
            family.add_metric(list(key), buckets, sums[key])
        yield family


def _states() -> Metric:
    family = GaugeMetricFamily(
        "scheduler_jobs",
        "Jobs now in each state and queue (failed: waiting for a retry).",
        labels=["state", "queue"],
    )
    for queue, stats in sorted(current_stats_by_queue().items()):
        for state in COUNTERS:
            family.add_metric([state, queue], stats[state])
    return family


def _workers() -> Iterator[Metric]:
    timeout = settings.SCHEDULER_WORKER_TIMEOUT
    live = GaugeMetricFamily(
        "scheduler_workers_live", f"Workers whose last heartbeat is under {timeout:g} s old."
    )
    labels = ["worker", "host", "pid"]
    up = GaugeMetricFamily(
        "scheduler_worker_up", "1 while its heartbeat is fresh, 0 once stale.", labels=labels
    )
    age = GaugeMetricFamily(
        "scheduler_worker_heartbeat_age_seconds", "Seconds since the last heartbeat.", labels=labels
    )
    slots = GaugeMetricFamily("scheduler_worker_slots", "Handler slots.", labels=labels)
    busy = GaugeMetricFamily("scheduler_worker_busy_slots", "Slots running a job.", labels=labels)
    unhandled = GaugeMetricFamily(
        "scheduler_worker_unhandled_type",
        "1 for each job type the worker met without a handler: it leaves their jobs waiting.",
        labels=[*labels, "type"],
    )
    n_live = 0
    for row in fetch("worker_metrics", {}):
        fresh = row["heartbeat_age"] < timeout
        n_live += fresh
        key = [str(row["id"]), row["hostname"], str(row["pid"])]
        up.add_metric(key, int(fresh))
        age.add_metric(key, max(0.0, row["heartbeat_age"]))
        slots.add_metric(key, row["concurrency"])
        # Its `processing` jobs include those it claimed ahead (`--prefetch`), waiting for a
        # thread: they fill no slot, and are there only while every slot is taken.
        busy.add_metric(key, min(row["busy"], row["concurrency"]))
        for job_type in row["unhandled_types"]:
            unhandled.add_metric([*key, job_type], 1)
    live.add_metric([], n_live)
    yield from (live, up, age, slots, busy, unhandled)


def _prune(rows: list[dict[str, Any]]) -> Iterator[Metric]:
    for name, (metric, doc) in _PRUNE.items():
        family = CounterMetricFamily(metric, doc)
        family.add_metric([], sum(row["n"] for row in rows if row["name"] == name))
        yield family
    last = last_prune()
    checked = GaugeMetricFamily(
        "scheduler_prune_last_run_timestamp_seconds", "When a pruner last looked (Unix time)."
    )
    if last is not None:
        checked.add_metric([], last.checked_at.timestamp())
    yield checked


registry = CollectorRegistry(auto_describe=False)
registry.register(SchedulerCollector())
