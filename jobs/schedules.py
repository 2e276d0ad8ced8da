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


def schedule_list() -> QuerySet[Schedule]:
    """Every schedule, oldest first, with the id of its run waiting or running."""
    live = Job.objects.filter(
        schedule=OuterRef("pk"),
        status__in=[JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.FAILED],
        in_dlq=False,
    ).order_by("-scheduled_at")
    return Schedule.objects.annotate(current_run_id=Subquery(live.values("id")[:1]))


def get_schedule(schedule_id: uuid.UUID) -> Schedule | None:
    return schedule_list().filter(id=schedule_id).first()


def upcoming_runs(schedule: Schedule, now: datetime | None = None) -> list[datetime]:
    """The next slots of a schedule that is not paused, from now."""
    if schedule.paused:
        return []
    recurrence = CronRecurrence(schedule.cron, ZoneInfo(schedule.timezone))
    return recurrence.upcoming(now or timezone.now(), UPCOMING)


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
