"""Why isn't this job running? One plain sentence and the data behind it.

The reasons are checked in the order the claim would meet them: a job that has finished or
runs says so; otherwise it waits for upstream jobs, for its scheduled time, or for its
retry; a due job of a paused queue waits for the queue's resume (the claim passes over
paused queues whoever asks); it needs a live worker that serves its queue and has a handler
for its type (a worker claims no job of a type its code lacks); then the limits on its type
and queue must have room (the claim holds back what they do not); and then it waits for the
jobs that those workers would claim before it (earliest virtual deadline first,
`jobs.scheduling`), which the answer counts, with the moments from which newer jobs of each
higher priority queue behind it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from .display import display_state
from .graph import held_up
from .models import AuditEntry, Job, JobDependency, JobStatus, Worker, WorkerStatus
from .queue_names import QueueSelection
from .queues import limit_usages, paused_queues, queue_overview, queue_target
from .representation import format_time, short_id
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
    "queue_paused",
    "no_live_worker",
    "no_handler",
    "limit_full",
    "jobs_ahead",
)


# The upstream jobs the sentence names: a fan-in of 1,000 made it 110 kB, and the details
# list them all anyway.
UPSTREAM_NAMED = 5


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
        return _cancelled(job)
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
    if display_state(job.status, job.in_dlq, job.pending_dependencies).blocked:
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
    if job.queue in paused_queues():
        return _paused(job)
    live_after = now - timedelta(seconds=settings.SCHEDULER_WORKER_TIMEOUT)
    live = list(Worker.objects.filter(status=WorkerStatus.RUNNING, heartbeat_at__gte=live_after))
    serving = [w for w in live if w.queue_selection.serves(job.queue)]
    if not serving:
        return _no_worker(job, live)
    able = [w for w in serving if job.type not in w.unhandled_types]
    if not able:
        return _no_handler(job, len(serving))
    if full := _full_limit(job):
        return full
    return _ahead(job, now, able)


def _cancelled(job: Job) -> tuple[str, str, dict[str, Any]]:
    at = f"It was cancelled at {format_time(job.cancelled_at)}"
    # A job that never started has no error but its cancel's: the operator's reason, or the
    # upstream job whose cancel or purge cancelled it (`cancel_dependents`). One that ran
    # keeps its last failure there, which is no reason for the cancel.
    if job.started_at is None and job.last_error:
        return (
            "cancelled",
            f"{at}: {job.last_error.rstrip('.')}.",
            {"cancel_reason": job.last_error},
        )
    return "cancelled", f"{at}.", {}


def _paused(job: Job) -> tuple[str, str, dict[str, Any]]:
    queue = queue_overview(job.queue)
    since = queue["changed_at"]
    # The entry of the pause that made it paused, if an operator did it (`jobs.audit`).
    entry = (
        AuditEntry.objects.filter(
            action="queue_pause", target=queue_target(job.queue), before__paused=False
        )
        .filter(at__gte=since)
        .order_by("at", "id")
        .first()
    )
    by = entry.username if entry is not None else None
    waiting = queue["pending"]
    return (
        "queue_paused",
        f"Its queue {job.queue} is paused since {format_time(since)}"
        + (f" (by {by})" if by else "")
        + f": none of its {waiting} pending job{'s' if waiting != 1 else ''} starts until an "
        "operator resumes it.",
        {
            "queue": job.queue,
            "paused_since": format_time(since),
            "paused_by": by,
            "pending_in_queue": waiting,
        },
    )


def _no_worker(job: Job, live: list[Worker]) -> tuple[str, str, dict[str, Any]]:
    details: dict[str, Any] = {
        "queue": job.queue,
        "live_workers": len(live),
        "served_by_live_workers": sorted({str(w.queue_selection) for w in live}),
    }
    if not live:
        return (
            "no_live_worker",
            "It is due, but no live worker serves its queue: start one "
            f"(python manage.py runworker{_queues_option(job.queue)}).",
            details,
        )
    return (
        "no_live_worker",
        f"It is due, but none of the {len(live)} live worker{'s' if len(live) != 1 else ''} "
        f"serves its queue {job.queue} (they serve: "
        f"{'; '.join(details['served_by_live_workers'])}): start one with "
        f"python manage.py runworker --queues {job.queue}.",
        details,
    )


def _no_handler(job: Job, serving: int) -> tuple[str, str, dict[str, Any]]:
    workers = "live worker" if serving == 1 else f"{serving} live workers"
    return (
        "no_handler",
        f"It is due, but the {workers} serving its queue {job.queue} "
        f"{'have' if serving != 1 else 'has'} no handler for its type {job.type} (a deploy out "
        "of step, or a type no longer in their code): it waits, unattempted, for a worker "
        "that has one. Deploy the handler to the workers, or cancel the jobs of this type.",
        {"type": job.type, "queue": job.queue, "workers_without_handler": serving},
    )


def _queues_option(queue: str) -> str:
    return "" if queue == "default" else f" --queues {queue}"


def _full_limit(job: Job) -> tuple[str, str, dict[str, Any]] | None:
    """The first limit on the job's type or queue that has no room now, if any."""
    for usage in [*limit_usages("type", job.type), *limit_usages("queue", job.queue)]:
        details = {
            key: usage[key]
            for key in (
                "scope",
                "name",
                "max_running",
                "running",
                "max_starts",
                "recent_starts",
                "period_seconds",
            )
        }
        on = f"its {'type' if usage['scope'] == 'type' else 'queue'} {usage['name']}"
        if usage["max_running"] is not None and usage["running"] >= usage["max_running"]:
            return (
                "limit_full",
                f"It is due, but the concurrency limit on {on} is full: {usage['running']} of "
                f"{usage['max_running']} running; it may start when one of them finishes.",
                {**details, "full": "max_running"},
            )
        if usage["max_starts"] is not None and usage["recent_starts"] >= usage["max_starts"]:
            return (
                "limit_full",
                f"It is due, but the rate limit on {on} is full: {usage['recent_starts']} of "
                f"{usage['max_starts']} starts in the last {usage['period_seconds']} s; it may "
                "start when the oldest of them leaves that window.",
                {**details, "full": "max_starts"},
            )
    return None


# What explain reads of each upstream job: what its display state is made of, and its type.
_UPSTREAM_FIELDS = ("type", "status", "in_dlq", "pending_dependencies", "queue")


def _upstream(job: Job) -> tuple[str, str, dict[str, Any]]:
    paused = paused_queues()
    upstream = [
        {
            "id": str(dep.depends_on_id),
            "type": dep.depends_on.type,
            "status": _state(dep.depends_on),
            # As the console's pill shows it: an upstream job waiting on its own is "blocked".
            "display_state": display_state(
                dep.depends_on.status,
                dep.depends_on.in_dlq,
                dep.depends_on.pending_dependencies,
                dep.depends_on.queue in paused,
            ).name,
        }
        # In the order the job names them (`upstream_ids`), so the sentence names the first
        # five it was given; unordered, the join's plan decided, and changed as rows moved.
        # An upstream job's payload and result may be large and are not shown.
        for dep in JobDependency.objects.filter(job=job)
        .select_related("depends_on")
        .only("depends_on_id", *(f"depends_on__{field}" for field in _UPSTREAM_FIELDS))
        .order_by("id")
    ]
    waiting = [u for u in upstream if u["status"] != JobStatus.COMPLETED]
    named = _named(
        [f"{u['type']} {short_id(u['id'])} ({u['display_state']})" for u in waiting], "upstream"
    )
    sentence = (
        f"It waits for {len(waiting)} upstream job{'s' if len(waiting) != 1 else ''} "
        f"to complete: {named}"
    )
    held = held_up([job.id])[job.id]
    dead_letters, truncated = held.dead_letters, held.truncated
    if dead_letters:
        one = len(dead_letters) == 1
        which = "the dead letter" if one else f"the {len(dead_letters)} dead letters"
        holding = _named([f"{d['type']} {short_id(d['id'])}" for d in dead_letters], "dead_letters")
        sentence += (
            f"; it is held up until {which} upstream{' (and maybe more)' if truncated else ''} "
            f"{'is retried and completes' if one else 'are retried and complete'}: {holding}"
        )
    return (
        "waiting_for_upstream",
        sentence + ".",
        {
            "upstream": upstream,
            "dead_letters": dead_letters,
            "dead_letters_truncated": truncated,
        },
    )


def _named(labels: list[str], listed_in: str) -> str:
    """The first `UPSTREAM_NAMED` labels, and how many more `details.<listed_in>` lists."""
    named = ", ".join(labels[:UPSTREAM_NAMED])
    if len(labels) > UPSTREAM_NAMED:
        named += f" and {len(labels) - UPSTREAM_NAMED} more (details.{listed_in} lists them)"
    return named


def _ahead(job: Job, now: datetime, able: list[Worker]) -> tuple[str, str, dict[str, Any]]:
    # Only what those workers claim competes with it: not the jobs of queues that only other
    # workers serve (a lane's), nor of a paused queue.
    served = QueueSelection.union(w.queue_selection for w in able)
    ahead = int(
        fetch(
            "jobs_ahead",
            {
                "virtual_deadline": job.virtual_deadline,
                "created_at": job.created_at,
                "id": job.id,
                "up_to": AHEAD_COUNTED_UP_TO,
                **served.params(),
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
            "live_workers": len(able),
        },
    )


def _state(job: Job) -> str:
    return "dlq" if job.in_dlq else job.status
