"""`manage.py seed_history`: a month of history with the promised shares, nothing runnable,
and the API, console and admin pages working over it."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Count, DateTimeField, Max, Min, Q
from django.test import Client
from django.utils import timezone

from jobs import limits
from jobs.models import AttemptStatus, Job, JobAttempt, JobLog, JobStatus, Worker

ROWS = 2000
HOOK = "https://hooks.example.com/orders"
pytestmark = pytest.mark.django_db


def seed_history(*args: str) -> str:
    out = StringIO()
    call_command("seed_history", *args, stdout=out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def development(settings: Any) -> None:
    # A development machine, where the command runs without --force (tests run with DEBUG off).
    settings.DEBUG = True


@pytest.fixture
def history() -> str:
    return seed_history("--rows", str(ROWS))


def fate(job: Job) -> str:
    return "dlq" if job.in_dlq else job.status


def test_history_has_the_documented_shares_over_a_month(history: str) -> None:
    now = timezone.now()
    jobs = list(Job.objects.all())
    assert len(jobs) == ROWS
    assert f"Added {ROWS:,} jobs" in history

    shares = {name: n / ROWS for name, n in Counter(fate(job) for job in jobs).items()}
    assert set(shares) == {"completed", "cancelled", "dlq", "pending"}
    assert shares["completed"] == pytest.approx(0.93, abs=0.03)
    assert shares["cancelled"] == pytest.approx(0.04, abs=0.02)
    assert shares["dlq"] == pytest.approx(0.02, abs=0.015)
    assert shares["pending"] == pytest.approx(0.01, abs=0.01)
    types = Counter(job.type for job in jobs)
    assert set(types) == {"send_email", "http_request", "generate_report", "noop", "flaky"}
    assert types["send_email"] / ROWS == pytest.approx(0.40, abs=0.05)
    assert Counter(job.priority for job in jobs).keys() == {1, 2, 3}

    created = Job.objects.aggregate(first=Min("created_at"), last=Max("created_at"))
    assert now - timedelta(days=30, minutes=2) <= created["first"] < now - timedelta(days=25)
    assert now - timedelta(days=5) < created["last"] <= now
    # Nothing for a worker to do: every pending job is scheduled in the future.
    assert all(job.run_at > now for job in jobs if job.status == JobStatus.PENDING)
    assert not Job.objects.filter(status=JobStatus.PROCESSING).exists()


def test_no_seeded_time_is_after_the_seeds_now() -> None:
    # A day of history: jobs created in its last hour were cancelled up to an hour later,
    # in the future (a cancelled_at of 21:00 seeded at 20:38).
    seed_history("--rows", "3000", "--days", "1")
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")  # the seed's: the test's transaction is its own
        (now,) = cursor.fetchone()
    # Only what is yet to come: a scheduled job's time, and every job's virtual deadline
    # (due time plus its priority's weight, later than now for a job due until just now).
    to_come = {(Job, "scheduled_at"), (Job, "run_at"), (Job, "virtual_deadline")}
    for model in (Job, JobAttempt, JobLog, Worker):
        rows = model.objects.all()
        if model is Job:
            rows = rows.exclude(status=JobStatus.PENDING)
        for field in model._meta.get_fields():
            if isinstance(field, DateTimeField) and (model, field.name) not in to_come:
                later = rows.filter(**{f"{field.name}__gt": now})
                assert not later.exists(), (model.__name__, field.name, later.count())
    pending = Job.objects.filter(status=JobStatus.PENDING)
    assert pending.exists() and not pending.filter(created_at__gt=now).exists()


def test_every_job_carries_the_attempts_and_logs_of_its_fate(history: str) -> None:
    jobs = Job.objects.annotate(
        attempts_made=Count("attempts"),
        succeeded=Count("attempts", filter=Q(attempts__status=AttemptStatus.SUCCEEDED)),
    )
    for job in jobs:
        assert job.attempts_made == job.attempt_count
        if job.status == JobStatus.COMPLETED:
            assert job.succeeded == 1 and 1 <= job.attempt_count <= 3
            assert job.started_at <= job.completed_at
        elif job.in_dlq:
            assert (job.attempt_count, job.succeeded) == (3, 0) and job.last_error
            # Grouped in the DLQ as `fail_jobs` would have stored it.
            assert job.error_signature == f"{job.type} · HandlerFailure: HTTP N from {HOOK}"
        else:
            assert job.attempt_count == 0 and job.started_at is None
    assert Job.objects.filter(status=JobStatus.COMPLETED, attempt_count__gt=1).exists()
    failed = JobAttempt.objects.filter(status=AttemptStatus.FAILED)
    assert failed.exists() and not failed.filter(stack_trace__isnull=True).exists()
    # The last attempt of a completed job is the succeeded one.
    last = (
        JobAttempt.objects.filter(job__status=JobStatus.COMPLETED)
        .order_by("job_id", "-attempt_number")
        .distinct("job_id")
    )
    assert {attempt.status for attempt in last} == {AttemptStatus.SUCCEEDED}
    assert JobLog.objects.filter(job__type="send_email").exists()
    assert not JobLog.objects.filter(job__type="noop", level="INFO").exists()
    workers = Worker.objects.filter(hostname__startswith="history-")
    assert workers.count() == 4 and {w.status for w in workers} == {"stopped"}
    assert sum(w.jobs_done for w in workers) == Job.objects.filter(status="completed").count()


def test_the_api_console_and_admin_work_over_the_history(
    history: str, viewer_client: Client
) -> None:
    listed = viewer_client.get("/api/v1/jobs", {"limit": 20})
    assert listed.status_code == 200
    newest = list(Job.objects.order_by("-created_at").values_list("id", flat=True)[:20])
    assert [job["id"] for job in listed.json()["results"]] == [str(i) for i in newest]
    emails = viewer_client.get("/api/v1/jobs", {"type": "send_email", "limit": 50}).json()
    assert {job["type"] for job in emails["results"]} == {"send_email"}
    stats = viewer_client.get("/api/v1/jobs/stats").json()
    assert stats["total"] == ROWS
    assert stats["dlq"] == Job.objects.filter(in_dlq=True).count()
    assert stats["completed"] == Job.objects.filter(status="completed").count()

    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    browser = Client()
    assert browser.login(username="root", password="pw-root")
    dlq_job = Job.objects.filter(in_dlq=True).first()
    assert dlq_job is not None
    for url in ["/", "/jobs", "/jobs?type=http_request", "/dlq", f"/dlq/{dlq_job.id}"]:
        assert browser.get(url).status_code == 200, url
    admin_list = browser.get("/admin/jobs/job/")
    assert admin_list.status_code == 200
    assert str(newest[0]) in admin_list.content.decode()


def test_one_seed_gives_the_same_history() -> None:
    def shape() -> list[tuple[str, str, int, int]]:
        return sorted(
            Job.objects.values_list("type", "status", "priority", "attempt_count")
            .annotate(n=Count("id"))
            .values_list("type", "status", "priority", "n")
        )

    seed_history("--rows", "300", "--seed", "0.5")
    first = shape()
    Job.objects.all().delete()
    seed_history("--rows", "300", "--seed", "0.5")
    assert shape() == first


def test_refuses_without_debug_unless_forced(settings: Any) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG is off"):
        seed_history("--rows", "10")
    assert not Job.objects.exists()
    seed_history("--rows", "10", "--force")
    assert Job.objects.count() == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rows", "0"], "--rows"),
        (["--rows", "ten"], "--rows"),
        (["--rows", "5", "--seed", "2"], "--seed must be in"),
        (["--rows", "5", "--days", "100000"], "--days reaches back at most to 1970"),
    ],
)
def test_rejects_bad_options(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        seed_history(*args)
    assert not Job.objects.exists()


def test_the_longest_history_begins_in_1970() -> None:
    # Times are written with a year from 1970 to 9998 (README, "Limits"); --days 100000
    # made jobs created in 1758.
    most = (timezone.now() - limits.EPOCH).days - 1
    with pytest.raises(CommandError, match=f"at most {most:,} days today, got {most + 1:,}"):
        seed_history("--rows", "50", "--days", str(most + 1), "--force")
    seed_history("--rows", "50", "--days", str(most), "--force")
    first = Job.objects.aggregate(first=Min("created_at"))["first"]
    assert first - limits.EPOCH > timedelta(hours=23)
    started = Worker.objects.filter(hostname__startswith="history-").aggregate(
        first=Min("started_at")
    )["first"]
    assert timedelta(hours=23) < started - limits.EPOCH < timedelta(days=2)
