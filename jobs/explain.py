"""Why isn't this job running? One plain sentence and the data behind it.

The reasons are checked in the order the claim would meet them: a job that has finished or
runs says so; otherwise it waits for upstream jobs, for its scheduled time, or for its
retry; a due job needs a live worker; and then it waits for the jobs ahead of it in run
order (earliest virtual deadline first, `jobs.scheduling`), which the answer counts, with
the moments from which newer jobs of each higher priority queue behind it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from .models import Job, JobDependency, JobStatus, Worker, WorkerStatus
from .representation import format_time
from .scheduling import PRIORITY_WEIGHT
from .sql import fetch
from .state import JobNotFound

# Counting the jobs ahead stops here: "more than 10,000" is answer enough, and cheap.
AHEAD_COUNTED_UP_TO = 10_000

REASONS = (
    "completed",
    "cancelled",
    "dead_letter",
    "running",
    "waiting_for_upstream",
    "scheduled",
    "waiting_for_retry",
    "no_live_worker",
    "jobs_ahead",
)


def explain(job_id: uuid.UUID) -> dict[str, Any]:
    """`{"reason", "message", "details"}` for the job, as of now."""
    job = Job.objects.filter(id=job_id).first()
    if job is None:
        raise JobNotFound(job_id)
    now = timezone.now()
    reason, message, details = _reason(job, now)
    return {"reason": reason, "message": message, "details": details}


def _reason(job: Job, now: datetime) -> tuple[str, str, dict[str, Any]]:
    if job.status == JobStatus.COMPLETED:
        return "completed", f"It completed at {format_time(job.completed_at)}.", {}
    if job.status == JobStatus.CANCELLED:
        return "cancelled", f"It was cancelled at {format_time(job.cancelled_at)}.", {}
    if job.in_dlq:
        return (
            "dead_letter",
            f"It used all {job.max_retries} attempts and is in the dead-letter queue; "
            "an operator may retry it.",
            {"attempt_count": job.attempt_count, "max_retries": job.max_retries},
        )
    if job.status == JobStatus.PROCESSING:
        return (
            "running",
            f"It is running (attempt {job.attempt_count} of {job.max_retries}) "
            f"since {format_time(job.started_at)}.",
            {"worker_id": str(job.worker_id) if job.worker_id else None},
        )
    if job.pending_dependencies > 0:
        return _upstream(job)
    if job.run_at > now:
        due = format_time(job.run_at)
        if job.status == JobStatus.FAILED:
            return (
                "waiting_for_retry",
                f"Its attempt {job.attempt_count} of {job.max_retries} failed; attempt "
                f"{job.attempt_count + 1} of {job.max_retries} is due at {due}.",
                {
                    "next_retry_at": due,
                    "attempt": job.attempt_count + 1,
                    "max_retries": job.max_retries,
                    "last_error": job.last_error,
                },
            )
        return (
            "scheduled",
            f"It is scheduled for {format_time(job.run_at)}.",
            {"run_at": format_time(job.run_at)},
        )
    live_after = now - timedelta(seconds=settings.SCHEDULER_WORKER_TIMEOUT)
    live = Worker.objects.filter(status=WorkerStatus.RUNNING, heartbeat_at__gte=live_after).count()
    if live == 0:
        return (
            "no_live_worker",
            "It is due, but no live worker serves its queue: start one "
            "(python manage.py runworker).",
            {"live_workers": 0},
        )
    return _ahead(job, now, live)


def _upstream(job: Job) -> tuple[str, str, dict[str, Any]]:
    upstream = [
        {
            "id": str(dep.depends_on_id),
            "type": dep.depends_on.type,
            "status": _state(dep.depends_on),
        }
        for dep in JobDependency.objects.filter(job=job).select_related("depends_on")
    ]
    waiting = [u for u in upstream if u["status"] != JobStatus.COMPLETED]
    named = ", ".join(f"{u['type']} {u['id'][:8]} ({u['status']})" for u in waiting)
    return (
        "waiting_for_upstream",
        f"It waits for {len(waiting)} upstream job{'s' if len(waiting) != 1 else ''} "
        f"to complete: {named}.",
        {"upstream": upstream},
    )


def _ahead(job: Job, now: datetime, live: int) -> tuple[str, str, dict[str, Any]]:
    ahead = int(
        fetch(
            "jobs_ahead",
            {
                "virtual_deadline": job.virtual_deadline,
                "created_at": job.created_at,
                "id": job.id,
                "up_to": AHEAD_COUNTED_UP_TO,
            },
        )[0]["ahead"]
    )
    # A newer job of priority p, due at t, has deadline t + p * weight: it queues behind
    # this job once t + p * weight > this job's deadline.
    behind_from = {
        str(p): format_time(job.virtual_deadline - p * PRIORITY_WEIGHT)
        for p in range(1, job.priority)
    }
    count = f"more than {AHEAD_COUNTED_UP_TO:,}" if ahead > AHEAD_COUNTED_UP_TO else f"{ahead:,}"
    sentence = f"It is due; {count} job{'s are' if ahead != 1 else ' is'} ahead of it in run order"
    if behind_from:
        sentence += "; new jobs of higher priority stop overtaking it from " + ", ".join(
            f"{at} (priority {p})" for p, at in behind_from.items()
        )
    return (
        "jobs_ahead",
        sentence + ".",
        {
            "ahead": min(ahead, AHEAD_COUNTED_UP_TO + 1),
            "virtual_deadline": format_time(job.virtual_deadline),
            "due_since": format_time(job.run_at),
            "priority": job.priority,
            "newer_jobs_queue_behind_from": behind_from,
            "live_workers": live,
        },
    )


def _state(job: Job) -> str:
    return "dlq" if job.in_dlq else job.status
