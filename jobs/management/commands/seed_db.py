"""`manage.py seed_db`: demo jobs of every kind, some already run, for a console that looks alive.

Every job is created with `jobs.state.enqueue` and every later status comes from the state
machine's own transitions (claim, complete, fail, cancel) made by a "seed_db" worker row:
the attempts, logs, events and counters are the ones a real worker would leave behind.
The plan is drawn from `random.Random(--seed)`, so one seed always gives the same jobs.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from jobs import state
from jobs.management.commands._database import DatabaseCommand
from jobs.models import Job, RecurInterval, Worker, WorkerStatus
from jobs.registry import JobContext, registry

DEFAULT_COUNT = 120
DEFAULT_SEED = 2026
# Nothing listens on the discard port: these webhooks fail and show retries, then the DLQ.
UNREACHABLE_WEBHOOK = "http://127.0.0.1:9/hooks/order-paid"

# What becomes of a job once created. Left "pending", it waits for a real worker.
PENDING, COMPLETE, RETRYING, DLQ, CANCEL = "pending", "complete", "retrying", "dlq", "cancel"


@dataclass
class Planned:
    type: str
    payload: dict[str, Any]
    priority: int
    fate: str = PENDING
    scheduled_in: timedelta | None = None
    recur_interval: str | None = None
    max_retries: int | None = None
    # Index in the plan of the job this one depends on.
    after: int | None = None


def _email(rng: random.Random, n: int) -> dict[str, Any]:
    subject = rng.choice(["Welcome aboard", "Your invoice", "Password reset", "Weekly digest"])
    return {
        "to": f"user{n}@example.com",
        "subject": subject,
        "html": f"<p>{subject}, user {n}.</p>",
    }


def _webhook(rng: random.Random, n: int) -> dict[str, Any]:
    return {
        "method": "POST",
        "url": UNREACHABLE_WEBHOOK,
        "json": {"order": 1000 + n, "amount": rng.randint(5, 500)},
        "timeout": 2,
    }


def _report(rng: random.Random, n: int) -> dict[str, Any]:
    name = rng.choice(["sales", "signups", "churn", "latency"])
    return {
        "report": f"{name}-{n}",
        "rows": rng.choice([1_000, 10_000, 50_000]),
        "format": rng.choice(["csv", "json", "pdf"]),
    }


def _flaky(rng: random.Random, n: int) -> dict[str, Any]:
    return {"failure_probability": rng.choice([0.2, 0.5, 0.8]), "sleep_ms": rng.randint(0, 300)}


PAYLOADS: dict[str, Callable[[random.Random, int], dict[str, Any]]] = {
    "send_email": _email,
    "http_request": _webhook,
    "generate_report": _report,
    "noop": lambda rng, n: {},
    "flaky": _flaky,
}
TYPE_WEIGHTS = {"send_email": 5, "http_request": 3, "generate_report": 4, "noop": 5, "flaky": 3}


def plan(count: int, rng: random.Random) -> list[Planned]:
    """`count` jobs: dependency chains, recurring series, jobs bound for the DLQ, and a mix
    of the five built-in types at priorities 1-3, some due later."""
    chains, recurring, doomed = count // 15, count // 20, count // 12
    jobs: list[Planned] = []
    for n in range(chains):
        # Upstream completed (dependent runnable), pending (dependent blocked), in the DLQ
        # (dependent waits for a retry), or cancelled (dependent cancelled with it).
        fate = (COMPLETE, PENDING, DLQ, CANCEL)[n % 4]
        if fate == DLQ:
            upstream = Planned("flaky", {"failure_probability": 1.0}, 2, DLQ, max_retries=1)
        else:
            upstream = Planned("generate_report", _report(rng, n), 2, fate)
        jobs.append(upstream)
        email = {**_email(rng, n), "subject": f"Report {n} is ready"}
        jobs.append(Planned("send_email", email, 1, after=len(jobs) - 1))
    intervals = list(RecurInterval.values)
    for n in range(recurring):
        job_type = rng.choice(["noop", "generate_report"]) if n else "noop"
        jobs.append(
            Planned(
                job_type,
                PAYLOADS[job_type](rng, n),
                rng.randint(1, 3),
                scheduled_in=timedelta(minutes=rng.randint(1, 30)) if n % 2 else None,
                recur_interval=intervals[n % len(intervals)],
            )
        )
    for n in range(doomed):
        # Half enter the DLQ now; the others get there once a worker runs them.
        jobs.append(
            Planned(
                "flaky",
                {"failure_probability": 1.0},
                rng.randint(1, 3),
                DLQ if n % 2 == 0 else PENDING,
                max_retries=rng.randint(1, 2),
            )
        )
    types, weights = list(TYPE_WEIGHTS), list(TYPE_WEIGHTS.values())
    for n in range(count - len(jobs)):
        job_type = rng.choices(types, weights)[0]
        job = Planned(job_type, PAYLOADS[job_type](rng, n), rng.choice([1, 2, 2, 3]))
        roll = rng.random()
        can_fail = job_type in ("flaky", "http_request")
        if roll < 0.2:
            job.scheduled_in = timedelta(minutes=rng.randint(5, 6 * 60))
        elif roll < 0.55 and job_type != "http_request":  # the webhook's port is closed
            job.fate = COMPLETE
        elif 0.55 <= roll < 0.65 and can_fail:
            job.fate = RETRYING
        elif 0.65 <= roll < 0.69:
            job.fate = CANCEL
        jobs.append(job)
    return jobs


class LogBuffer(logging.Handler):
    """Keeps a handler's log lines as (time, level, message), as the worker's attempt log
    does, until `take()` hands them to `state.append_logs`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.lines: list[tuple[datetime, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        created = datetime.fromtimestamp(record.created, UTC)
        self.lines.append((created, record.levelname, self.format(record)))

    def take(self) -> list[tuple[datetime, str, str]]:
        lines, self.lines = self.lines, []
        return lines


def _run(job: Planned, job_id: uuid.UUID, attempt_id: uuid.UUID, log: logging.Logger) -> Any:
    """What the job's handler returns. The harmless ones really run; an email is not sent
    (the configured backend could be real SMTP), its handler's return value is given."""
    if job.type == "send_email":
        log.info("seed_db: marked as sent to %s without sending", job.payload["to"])
        return {"sent": 1, "to": job.payload["to"]}
    if job.type == "flaky":
        return {"survived": True}
    context = JobContext(job_id, job.type, job.payload, attempt_id, 1, log)
    return registry.get(job.type).run(context)


def _failure(job: Planned) -> tuple[str, str]:
    if job.type == "http_request":
        return "URLError", "<urlopen error [Errno 111] Connection refused>"
    probability = job.payload.get("failure_probability", 0.5)
    return "HandlerFailure", f"simulated failure (probability {probability})"


class Seeder:
    """Creates the planned jobs, then takes each to its fate through `jobs.state`."""

    def __init__(self, rng: random.Random, worker_id: uuid.UUID) -> None:
        self.rng = rng
        self.worker_id = worker_id

    def create(self, jobs: list[Planned]) -> list[uuid.UUID]:
        now = timezone.now()
        ids: list[uuid.UUID] = []
        for job in jobs:
            created = state.enqueue(
                job.type,
                job.payload,
                priority=job.priority,
                scheduled_at=now + job.scheduled_in if job.scheduled_in else None,
                recur_interval=job.recur_interval,
                max_retries=job.max_retries,
                depends_on=ids[job.after] if job.after is not None else None,
            )
            ids.append(uuid.UUID(created["id"]))
        return ids

    def complete(self, jobs: dict[uuid.UUID, Planned]) -> None:
        successes = []
        for claimed in state.claim(self.worker_id, len(jobs), list(jobs)):
            # As in the worker: the handler's log lines go to the attempt's job_logs.
            buffer = LogBuffer()
            log = logging.Logger(f"worker.jobs.{claimed.type}")
            log.addHandler(buffer)
            result = _run(jobs[claimed.id], claimed.id, claimed.attempt_id, log)
            state.append_logs(claimed.id, claimed.attempt_id, buffer.take())
            successes.append(state.Success(claimed.id, claimed.attempt_id, result, timezone.now()))
        state.complete(successes, self.worker_id)

    def fail(self, job: Planned, job_id: uuid.UUID, *, until_dlq: bool) -> None:
        error_type, message = _failure(job)
        while claimed := state.claim(self.worker_id, 1, [job_id]):
            # Straight back for the next attempt when heading for the DLQ, else a later retry.
            delay = timedelta(0) if until_dlq else timedelta(minutes=self.rng.randint(2, 45))
            failure = state.Failure(
                job_id,
                claimed[0].attempt_id,
                error_type=error_type,
                error_message=message,
                stack_trace=f"Traceback (most recent call last):\n  ...\n{error_type}: {message}",
                retry_delay=delay,
                finished_at=timezone.now(),
            )
            failed = state.fail([failure]).failed
            if not until_dlq or not failed or failed[0]["in_dlq"]:
                return


FAN_OUT = 50


def seed_workflows() -> None:
    """A fan-out/fan-in (one extract, 50 transforms, one load waiting for all of them) and
    two cron schedules, left for a real worker to run."""
    extract = state.enqueue("noop", {"step": "extract"}, priority=1)
    parts = [
        uuid.UUID(
            state.enqueue(
                "noop", {"step": "transform", "part": n}, depends_on=uuid.UUID(extract["id"])
            )["id"]
        )
        for n in range(1, FAN_OUT + 1)
    ]
    state.enqueue("noop", {"step": "load"}, priority=1, depends_on=parts)
    state.enqueue("noop", {"step": "nightly"}, cron="30 2 * * *", timezone="Europe/Berlin")
    state.enqueue("noop", {"step": "quarter-hourly"}, priority=3, cron="*/15 * * * *")


class Command(DatabaseCommand):
    help = (
        "Add demo jobs (default 120): every built-in type, priorities 1-3, scheduled, "
        "recurring, dependent, and some already completed, retrying, cancelled or in the DLQ. "
        "Refuses a database that already has jobs unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="jobs to create")
        parser.add_argument(
            "--seed", type=int, default=DEFAULT_SEED, help="random seed (same seed, same jobs)"
        )
        parser.add_argument(
            "--force", action="store_true", help="seed even when the database already has jobs"
        )
        parser.add_argument(
            "--workflows",
            action="store_true",
            help="also a fan-out/fan-in (1 -> 50 -> 1) and two cron schedules",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count: int = options["count"]
        if not 1 <= count <= 10_000:
            raise CommandError(f"--count must be from 1 to 10000, got {count}.")
        existing = Job.objects.count()
        if existing and not options["force"]:
            raise CommandError(
                f"The database already has {existing} job(s); seed_db only fills an empty one. "
                "Run reset_db first, or pass --force to add the demo jobs anyway."
            )
        rng = random.Random(options["seed"])  # noqa: S311 - demo data
        jobs = plan(count, rng)
        now = timezone.now()
        worker = Worker.objects.create(
            hostname=f"seed_db@{socket.gethostname()}"[:255],
            pid=os.getpid(),
            status=WorkerStatus.STOPPED,
            started_at=now,
            heartbeat_at=now,
            stopped_at=now,
        )
        seeder = Seeder(rng, worker.id)
        ids = seeder.create(jobs)
        seeder.complete({i: job for i, job in zip(ids, jobs, strict=True) if job.fate == COMPLETE})
        for job_id, job in zip(ids, jobs, strict=True):
            if job.fate in (RETRYING, DLQ):
                seeder.fail(job, job_id, until_dlq=job.fate == DLQ)
            elif job.fate == CANCEL:
                state.cancel(job_id, "Cancelled by seed_db, to show a cancelled job.")
        if options["workflows"]:
            seed_workflows()
        # Counted once everything is made: the workflows' jobs and cron runs too.
        self._summary(count, options["seed"], options["workflows"])

    def _summary(self, count: int, seed: int, workflows: bool) -> None:
        jobs = Job.objects.all()
        statuses = Counter(
            "dlq" if in_dlq else status for status, in_dlq in jobs.values_list("status", "in_dlq")
        )
        types = Counter(jobs.values_list("type", flat=True))
        self.stdout.write(
            self.style.SUCCESS(f"Seeded {count} demo jobs (seed {seed}).")
            + (
                "\n  workflows: a fan-out/fan-in of 52 jobs (1 -> 50 -> 1), 2 cron schedules"
                if workflows
                else ""
            )
            + "\n  by status: "
            + ", ".join(f"{name} {n}" for name, n in sorted(statuses.items()))
            + "\n  by type:   "
            + ", ".join(f"{name} {n}" for name, n in sorted(types.items()))
        )
