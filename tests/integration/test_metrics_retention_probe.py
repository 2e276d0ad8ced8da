"""GET /metrics as a Prometheus server reads it, and the pruner as an operator relies on it:
an exposition a strict parser accepts (escaped labels, cumulative buckets ending in +Inf
equal to the count), counters that never go back when jobs are pruned or purged, figures
that agree with /jobs/stats, and a pruner that keeps up with every table it bounds."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from jobs import state
from jobs.models import AuditEntry, IdempotencyKey, Job, Worker
from jobs.registry import registry
from tests.attempts import fail_attempt
from tests.integration.test_retention import LONG_AGO, age
from worker.maintenance import Pruner

pytestmark = pytest.mark.django_db(transaction=True)

# A job type may hold any printable character: the label values must be escaped.
ODD_TYPE = 'say "hi" \\ there, ü'
ODD_QUEUE = "a.b:c-d"

Series = tuple[str, tuple[tuple[str, str], ...]]


@pytest.fixture
def odd_type() -> Iterator[str]:
    registry.register(ODD_TYPE)(lambda payload: None)
    yield ODD_TYPE
    registry.unregister(ODD_TYPE)


@pytest.fixture
def worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname='rack "7" \\ b', pid=4242, concurrency=2, started_at=now, heartbeat_at=now
    )


def through(
    worker: Worker, outcome: str, *, type: str = "noop", queue: str = "default"
) -> uuid.UUID:
    """A job taken through a real claim to `outcome`: complete, retry, dlq or processing."""
    job_id = uuid.UUID(
        state.enqueue(type, {}, queue=queue, max_retries=1 if outcome == "dlq" else 3)["id"]
    )
    (claimed,) = state.claim(worker.id, 1, [job_id])
    if outcome == "complete":
        state.complete([state.Success(job_id, claimed.attempt_id, None, timezone.now())])
    elif outcome in ("retry", "dlq"):
        fail_attempt(
            job_id,
            claimed.attempt_id,
            error_type="Boom",
            error_message="boom",
            stack_trace=None,
            retry_delay=timedelta(minutes=5),
        )
    return job_id


_SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\\n]|\\[\\"n])*")*\})? (\S+)$'
)


def strict_samples(text: str) -> dict[Series, float]:
    """The samples of a text exposition (0.0.4), refusing what Prometheus would refuse or
    misread: a sample before its family's HELP and TYPE, a family declared twice, a series
    given twice, a counter not named `_total`, histogram buckets that are not cumulative or
    do not end in +Inf equal to `_count`, a histogram without `_sum`."""
    families: dict[str, str] = {}
    helped: set[str] = set()
    samples: dict[Series, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in helped, f"HELP twice for {name}"
            helped.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in families, f"TYPE twice for {name}"
            assert name in helped, f"TYPE before HELP for {name}"
            if kind == "counter":
                assert name.endswith("_total"), name
            families[name] = kind
        else:
            assert not line.startswith("#"), line
            match = _SAMPLE.match(line)
            assert match, f"malformed sample line: {line!r}"
            name = match.group(1)
            family = next(
                (
                    f
                    for f in (name, *(name.removesuffix(s) for s in ("_bucket", "_count", "_sum")))
                    if f in families
                ),
                None,
            )
            assert family is not None, f"sample before its TYPE: {line!r}"
            assert families[family] != "histogram" or name != family, line
            parsed = next(iter(text_string_to_metric_families(line + "\n"))).samples[0]
            key = (name, tuple(sorted(parsed.labels.items())))
            assert key not in samples, f"series given twice: {key}"
            samples[key] = parsed.value
    for family, kind in families.items():
        if kind == "histogram":
            check_histogram(family, samples)
    return samples


def check_histogram(family: str, samples: dict[Series, float]) -> None:
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for (name, labels), value in samples.items():
        if name == f"{family}_bucket":
            rest = tuple(item for item in labels if item[0] != "le")
            buckets.setdefault(rest, []).append((float(dict(labels)["le"]), value))
    for labels, bounds in buckets.items():
        bounds.sort()
        counts = [n for _, n in bounds]
        assert counts == sorted(counts), f"{family}{labels}: buckets not cumulative"
        assert bounds[-1][0] == math.inf, f"{family}{labels}: no +Inf bucket"
        assert samples[(f"{family}_count", labels)] == bounds[-1][1]
        assert (f"{family}_sum", labels) in samples
    series_counted = {labels for (name, labels) in samples if name == f"{family}_count"}
    assert series_counted == set(buckets), f"{family}: a _count without buckets"


def scrape(client: APIClient | Client, accept: str = "") -> str:
    response = client.get("/metrics", HTTP_ACCEPT=accept) if accept else client.get("/metrics")
    assert response.status_code == 200, response.content
    return response.content.decode()


def counts(samples: dict[Series, float]) -> dict[Series, float]:
    """What must never go down: every counter and every histogram's buckets, counts, sums."""
    return {
        key: value
        for key, value in samples.items()
        if key[0].endswith(("_total", "_bucket", "_count", "_sum"))
    }


def test_the_exposition_is_one_a_strict_parser_accepts_with_odd_labels_escaped(
    viewer_client: APIClient, worker: Worker, odd_type: str
) -> None:
    for outcome in ("complete", "retry", "dlq", "processing"):
        through(worker, outcome, type=odd_type, queue=ODD_QUEUE)
        through(worker, outcome)
    Worker.objects.filter(id=worker.id).update(unhandled_types=[odd_type])

    samples = strict_samples(scrape(viewer_client))

    odd = (("queue", ODD_QUEUE), ("type", odd_type))
    assert samples[("scheduler_jobs_created_total", odd)] == 4
    assert samples[("scheduler_jobs_failed_total", odd)] == 2
    assert samples[("scheduler_job_wait_seconds_count", odd)] == 4
    assert samples[("scheduler_job_run_seconds_count", (("outcome", "succeeded"), *odd))] == 1
    host = (("host", 'rack "7" \\ b'), ("pid", "4242"), ("worker", str(worker.id)))
    assert samples[("scheduler_worker_unhandled_type", (*host[:2], ("type", odd_type), host[2]))]
    # OpenMetrics, which a scraper may ask for, parses too and says the same.
    openmetrics = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parse_openmetrics(scrape(viewer_client, "application/openmetrics-text"))
        for sample in family.samples
    }
    assert openmetrics[("scheduler_jobs_created_total", odd)] == 4
    assert openmetrics[("scheduler_job_wait_seconds_count", odd)] == 4


def test_pruning_and_purging_never_take_a_counter_back_and_the_gauge_is_jobs_stats(
    viewer_client: APIClient, worker: Worker
) -> None:
    done = [through(worker, "complete", queue=q) for q in ("default", "default", "emails")]
    dead = through(worker, "dlq", queue="emails")
    through(worker, "retry")
    through(worker, "processing", queue="emails")
    before = counts(strict_samples(scrape(viewer_client)))

    age(*done)
    assert Pruner(interval=60.0, batch=100).run_once()["jobs"] == 3
    state.purge(dead)
    samples = strict_samples(scrape(viewer_client))

    after = counts(samples)
    fell = {
        key: (value, after.get(key)) for key, value in before.items() if after.get(key, -1) < value
    }
    assert not fell, f"counters went back: {fell}"
    assert after[("scheduler_pruned_jobs_total", ())] == 3
    stats = viewer_client.get("/api/v1/jobs/stats").json()
    gauge: dict[str, float] = {}
    for (name, labels), value in samples.items():
        if name == "scheduler_jobs":
            gauge[dict(labels)["state"]] = gauge.get(dict(labels)["state"], 0) + value
    assert gauge == {key: n for key, n in stats.items() if key != "total"}
    assert stats == {
        "pending": 0,
        "processing": 1,
        "completed": 0,
        "failed": 1,
        "dlq": 0,
        "cancelled": 0,
        "total": 2,
    }


def test_a_console_session_reads_the_metrics_and_nobody_else_does(viewer: Any) -> None:
    session = Client()
    session.force_login(viewer)
    assert "scheduler_jobs" in scrape(session)
    refused = Client().get("/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "not_authenticated"


def test_busy_slots_never_exceed_slots_when_claimed_jobs_wait_for_a_thread(
    viewer_client: APIClient, worker: Worker
) -> None:
    # A worker claims ahead of its threads (`--prefetch`): its claimed jobs that wait for a
    # thread are `processing` too, but they fill no slot. Counted as busy, a 2-thread worker
    # holding 5 claims was "250 percent busy" in the README's saturation query.
    for _ in range(5):
        through(worker, "processing")

    samples = strict_samples(scrape(viewer_client))

    this = (("host", 'rack "7" \\ b'), ("pid", "4242"), ("worker", str(worker.id)))
    assert samples[("scheduler_worker_slots", this)] == 2
    assert samples[("scheduler_worker_busy_slots", this)] == 2
    assert samples[("scheduler_jobs", (("queue", "default"), ("state", "processing")))] == 5


def old_audit_entries(n: int) -> None:
    at = timezone.now() - timedelta(days=91)
    AuditEntry.objects.bulk_create(
        AuditEntry(at=at, username="op", source="api", action="create", target=str(i))
        for i in range(n)
    )


def test_an_audit_log_backlog_keeps_the_pruner_going_as_a_job_backlog_does(settings: Any) -> None:
    # Every job created through the API is an audit entry. With jobs kept for ever, a pass
    # a minute removed at most one batch of entries: past 1,000 API jobs a minute (17 a
    # second) the log grew without end, whatever SCHEDULER_RETAIN_AUDIT said.
    settings.SCHEDULER_RETAIN_COMPLETED = 0
    settings.SCHEDULER_RETAIN_AUDIT = 90 * 24 * 3600.0
    old_audit_entries(5)
    recent = AuditEntry.objects.create(username="op", source="api", action="create")
    unit = Pruner(interval=60.0, batch=2)

    unit.run_once()
    assert AuditEntry.objects.count() == 4
    assert unit.interval == 0.0  # a full batch: the worker's next turn prunes again
    unit.run_once()
    unit.run_once()
    assert list(AuditEntry.objects.all()) == [recent]
    assert unit.interval == 60.0  # caught up: back to its pace


def test_an_idempotency_key_backlog_keeps_the_pruner_going(settings: Any) -> None:
    settings.SCHEDULER_RETAIN_COMPLETED = 0
    long_ago = timezone.now() - timedelta(hours=25)
    IdempotencyKey.objects.bulk_create(
        IdempotencyKey(key=f"old-{i}", fingerprint="f", job_ids=[], created_at=long_ago)
        for i in range(3)
    )
    unit = Pruner(interval=60.0, batch=2)

    unit.run_once()
    assert IdempotencyKey.objects.count() == 1
    assert unit.interval == 0.0
    unit.run_once()
    assert IdempotencyKey.objects.count() == 0
    assert unit.interval == 60.0


def test_a_dead_letter_a_waiting_job_depends_on_outlives_the_dlq_retention(
    worker: Worker, settings: Any
) -> None:
    settings.SCHEDULER_RETAIN_DLQ = 7 * 24 * 3600.0
    dead = through(worker, "dlq")
    dependent = uuid.UUID(
        state.enqueue("noop", {}, depends_on=dead, scheduled_at=timezone.now() + LONG_AGO)["id"]
    )
    age(dead)
    unit = Pruner(interval=60.0, batch=10)

    assert unit.run_once()["jobs"] == 0
    assert state.get_job(dependent)["depends_on"] == str(dead)
    state.cancel(dependent)  # nothing waits on the dead letter now
    assert unit.run_once()["jobs"] == 1
    assert not Job.objects.filter(id=dead).exists()
    assert Job.objects.filter(id=dependent).exists()
