"""The benchmark's job types, registered like any user's (no inline fast path, defaults)."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from benchmarks.probes import record_start
from jobs.registry import handler


@handler("bench_noop")
def bench_noop(job: Any) -> None:
    """Does nothing: what the drain and enqueue figures move."""


@handler("bench_probe")
def bench_probe(job: Any) -> None:
    """Notes when it started, for the enqueue-to-start latency."""
    started = time.time()
    record_start(settings.REDIS_URL, job.payload, started)
