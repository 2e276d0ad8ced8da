"""Reading cron schedules: the schedule object of the API, the console and the admin.

Pausing and resuming are transitions of their runs, in `jobs.state`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from .models import Job, JobStatus, Schedule
from .recurrence import CronRecurrence
from .representation import format_time

# How many upcoming slots a schedule object lists.
UPCOMING = 5


def with_current_run(schedules: QuerySet[Schedule]) -> QuerySet[Schedule]:
    """`schedules` with the id and the slot of each one's run waiting or running."""
    live = Job.objects.filter(
        schedule=OuterRef("pk"),
        status__in=[JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.FAILED],
        in_dlq=False,
    ).order_by("-scheduled_at")
    return schedules.annotate(
        current_run_id=Subquery(live.values("id")[:1]),
        current_run_at=Subquery(live.values("scheduled_at")[:1]),
    )


def schedule_list() -> QuerySet[Schedule]:
    """Every schedule, oldest first, with its run waiting or running (`with_current_run`)."""
    return with_current_run(Schedule.objects.all())


def get_schedule(schedule_id: uuid.UUID) -> Schedule | None:
    return schedule_list().filter(id=schedule_id).first()


def upcoming_runs(schedule: Schedule, now: datetime | None = None) -> list[datetime]:
    """The next slots of a schedule read through `with_current_run`: from its waiting run's
    slot while that is ahead, since the slots before it were skipped (a cancelled run), else
    from now. None while it is paused or no run of it waits or runs: only a run's
    completion creates the next, so a series whose run is in the DLQ, or was purged from
    it, runs nothing until that run is retried or the schedule resumed."""
    waiting: datetime | None = getattr(schedule, "current_run_at", None)
    if schedule.paused or waiting is None:
        return []
    recurrence = CronRecurrence(schedule.cron, ZoneInfo(schedule.timezone))
    now = now or timezone.now()
    if waiting > now:
        return [waiting, *recurrence.upcoming(waiting, UPCOMING - 1)]
    return recurrence.upcoming(now, UPCOMING)


def represent_schedule(schedule: Schedule) -> dict[str, Any]:
    """The schedule object of a schedule read through `schedule_list`."""
    current = getattr(schedule, "current_run_id", None)
    return {
        "id": str(schedule.id),
        "type": schedule.type,
        "payload": schedule.payload,
        "priority": schedule.priority,
        "max_retries": schedule.max_retries,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "paused": schedule.paused,
        "next_runs": [format_time(slot) for slot in upcoming_runs(schedule)],
        "current_run_id": str(current) if current is not None else None,
        "created_at": format_time(schedule.created_at),
        "updated_at": format_time(schedule.updated_at),
    }
