"""`manage.py seed_db` and `manage.py reset_db` against the real test database."""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import (
    AttemptStatus,
    Job,
    JobAttempt,
    JobDependency,
    JobLog,
    JobStatus,
    Schedule,
    Worker,
)

# Seeding claims jobs with the database's now(), which a test wrapped in one transaction
# would freeze before the jobs exist: these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_db", *args, stdout=out)
    return out.getvalue()


def signature() -> list[tuple[Any, ...]]:
    """What a seed decides: everything about the jobs except ids and clock times."""
    return sorted(
        (
            job.type,
            json.dumps(job.payload, sort_keys=True),
            job.priority,
            job.status,
            job.in_dlq,
            job.recur_interval or "",
            job.max_retries,
            job.attempt_count,
            job.pending_dependencies,
        )
        for job in Job.objects.all()
    )


def test_seed_db_creates_120_varied_jobs_in_every_state() -> None:
    output = seed()
    now = timezone.now()
    jobs = Job.objects.all()
    assert jobs.count() == 120
    assert "Seeded 120 demo jobs (seed 2026)." in output
    assert set(jobs.values_list("type", flat=True)) == {
        "send_email",
        "http_request",
        "generate_report",
        "noop",
        "flaky",
    }
    assert set(jobs.values_list("priority", flat=True)) == {1, 2, 3}
    assert set(jobs.exclude(recur_interval=None).values_list("recur_interval", flat=True)) == {
        "every_1_minute",
        "every_5_minutes",
        "every_1_hour",
    }
    assert jobs.filter(status=JobStatus.PENDING, scheduled_at__gt=now).count() >= 10

    statuses = Counter(jobs.values_list("status", "in_dlq"))
    assert statuses[(JobStatus.COMPLETED, False)] >= 20
    assert statuses[(JobStatus.PENDING, False)] >= 30
    assert statuses[(JobStatus.FAILED, True)] >= 5  # in the DLQ
    assert statuses[(JobStatus.FAILED, False)] >= 1  # waiting for a retry
    assert statuses[(JobStatus.CANCELLED, False)] >= 2
    assert jobs.filter(status=JobStatus.PROCESSING).count() == 0

    # The DLQ jobs got there by failing every attempt they had.
    for job in jobs.filter(in_dlq=True):
        attempts = JobAttempt.objects.filter(job=job)
        assert attempts.count() == job.max_retries == job.attempt_count
        assert set(attempts.values_list("status", "error_type")) == {
            (AttemptStatus.FAILED, "HandlerFailure")
        }
    for retrying in jobs.filter(status=JobStatus.FAILED, in_dlq=False):
        assert retrying.attempt_count < retrying.max_retries
        assert retrying.next_retry_at is not None and retrying.next_retry_at > now

    # Dependencies: released after a completed upstream, blocked behind a pending or DLQ one,
    # cancelled with a cancelled one.
    edges = JobDependency.objects.select_related("job", "depends_on")
    assert edges.count() == 8
    outcomes = {(e.depends_on.status, e.depends_on.in_dlq, e.job.status) for e in edges}
    assert outcomes == {
        (JobStatus.COMPLETED, False, JobStatus.PENDING),
        (JobStatus.PENDING, False, JobStatus.PENDING),
        (JobStatus.FAILED, True, JobStatus.PENDING),
        (JobStatus.CANCELLED, False, JobStatus.CANCELLED),
    }
    assert jobs.filter(status=JobStatus.PENDING, pending_dependencies__gt=0).count() == 4
    cancelled_dependent = edges.filter(job__status=JobStatus.CANCELLED).first()
    assert cancelled_dependent is not None
    assert str(cancelled_dependent.depends_on_id) in (cancelled_dependent.job.last_error or "")

    # Completed jobs carry their handler's result and were run by the seed worker.
    report = jobs.filter(type="generate_report", status=JobStatus.COMPLETED).first()
    assert report is not None
    assert report.result["report"] == report.payload["report"]
    assert JobLog.objects.filter(job=report, message__startswith="aggregated ").count() == 1
    seed_worker = Worker.objects.get(hostname__startswith="seed_db@")
    assert seed_worker.status == "stopped"
    assert seed_worker.jobs_done == statuses[(JobStatus.COMPLETED, False)]


def test_seed_db_is_deterministic_for_a_seed() -> None:
    seed("--seed", "7", "--count", "40")
    first = signature()
    assert len(first) == 40
    Job.objects.all().delete()
    seed("--seed", "7", "--count", "40")
    assert signature() == first
    Job.objects.all().delete()
    seed("--seed", "8", "--count", "40")
    assert signature() != first


def test_seed_db_refuses_a_database_that_has_jobs() -> None:
    state.enqueue("noop", {})
    with pytest.raises(CommandError) as refused:
        seed()
    assert str(refused.value) == (
        "The database already has 1 job(s); seed_db only fills an empty one. "
        "Run reset_db first, or pass --force to add the demo jobs anyway."
    )
    assert Job.objects.count() == 1
    seed("--force", "--count", "15")
    assert Job.objects.count() == 16


@pytest.mark.parametrize("count", ["0", "10001"])
def test_seed_db_rejects_a_count_out_of_range(count: str) -> None:
    with pytest.raises(CommandError, match=f"--count must be from 1 to 10000, got {count}"):
        seed("--count", count)
    assert Job.objects.count() == 0


def test_a_small_seed_is_plain_jobs() -> None:
    seed("--count", "5")
    assert Job.objects.count() == 5
    assert JobDependency.objects.count() == 0


def test_reset_db_refuses_without_debug(settings: Any) -> None:
    settings.DEBUG = False
    state.enqueue("noop", {})
    with pytest.raises(CommandError, match=r"DEBUG is off: this may be a production database"):
        call_command("reset_db", stdout=StringIO())
    assert Job.objects.count() == 1


def test_reset_db_with_force_drops_everything_and_migrates(settings: Any) -> None:
    settings.DEBUG = False
    get_user_model().objects.create_user("someone")
    state.enqueue("noop", {})
    out = StringIO()
    call_command("reset_db", "--force", stdout=out)
    assert f"Database {connection.settings_dict['NAME']}: schema dropped and recreated" in (
        out.getvalue()
    )
    assert Job.objects.count() == 0
    assert get_user_model().objects.count() == 0
    call_command("migrate", check_unapplied=True, stdout=StringIO())  # exits 1 if any is missing
    with connection.cursor() as cursor:
        # SQL created by a migration outside the models is back too.
        cursor.execute("SELECT scheduler_time(now()) IS NOT NULL")
        assert cursor.fetchone()[0] is True
    # The recreated schema is fully usable.
    seed("--count", "20")
    assert Job.objects.count() == 20


def test_seed_db_workflows_add_a_fan_out_fan_in_and_cron_schedules() -> None:
    output = seed("--count", "5", "--workflows")
    assert "a fan-out/fan-in of 52 jobs (1 -> 50 -> 1), 2 cron schedules" in output
    load = Job.objects.get(payload__step="load")
    assert (load.status, load.pending_dependencies) == (JobStatus.PENDING, 50)
    parts = Job.objects.filter(payload__step="transform")
    assert parts.count() == 50 and {p.pending_dependencies for p in parts} == {1}
    assert JobDependency.objects.count() == 100
    assert Schedule.objects.count() == 2
    assert Job.objects.filter(schedule__isnull=False, status=JobStatus.PENDING).count() == 2


def summary_counts(output: str, line: str) -> dict[str, int]:
    """`line`'s totals in seed_db's summary ("  by status: completed 3, pending 56")."""
    (listed,) = [
        text.split(":", 1)[1].strip()
        for text in output.splitlines()
        if text.strip().startswith(line)
    ]
    return {name: int(n) for name, n in (item.rsplit(" ", 1) for item in listed.split(", "))}


def test_seed_db_summary_counts_the_workflows_too() -> None:
    # The totals were printed before the workflows were made: 54 jobs short.
    output = seed("--count", "5", "--workflows")
    assert Job.objects.count() == 5 + 52 + 2
    by_status = Counter(
        "dlq" if in_dlq else status
        for status, in_dlq in Job.objects.values_list("status", "in_dlq")
    )
    assert summary_counts(output, "by status:") == by_status
    by_type = Counter(Job.objects.values_list("type", flat=True))
    assert summary_counts(output, "by type:") == by_type
