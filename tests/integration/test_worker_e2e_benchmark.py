"""`benchmark --e2e` end to end at a small size: it drains through a real worker, measures,
prints its table, and leaves no benchmark rows behind."""

from __future__ import annotations

import re
from io import StringIO

import pytest

from jobs.models import Job, JobAttempt, Worker
from worker.bench.e2e import run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_e2e_benchmark_reports_throughput_and_latency_and_cleans_up():
    out = StringIO()
    figures = run(out, jobs=300, trickle=20)

    printed = out.getvalue()
    assert re.search(r"\| jobs drained \| 300 \|", printed)
    assert re.search(r"\| throughput \(jobs/s\) \| [\d,]+ \| >= 3,000 \|", printed)
    assert re.search(r"\| enqueue-to-start p50 \(ms\) \| [\d.]+ \| < 5 \|", printed)
    throughput, latency = figures["throughput"], figures["latency"]
    assert throughput["jobs_per_second"] > 0 and throughput["drain_seconds"] > 0
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
    # Generous: an idle worker starts a new job long before its 30 s feeder tick.
    assert latency["p50_ms"] < 500
    assert not Job.objects.exists() and not JobAttempt.objects.exists()
    assert not Worker.objects.exists()
