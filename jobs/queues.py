"""Queues: every job belongs to one (`Job.queue`, `default` unless its type or its caller
names another; `jobs.queue_names`). A worker serves all queues or some (`runworker
--queues`, `--queue NAME=N`); an operator pauses and resumes a queue, stored in
`job_queues` so that it outlives restarts.

A paused queue's jobs stay pending: the claim and the feeder pass over them in SQL
(`jobs/sql/queries.sql`), so a pause holds from its commit on, on every worker, whatever
they hold in memory. A resume wakes the workers (NOTIFY `feed`) so they load the queue's
jobs at once. `queue_overviews` and `paused_queues` are the reads the web layer (and an
"explain" of why a job waits) build on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from . import audit
from .models import Limit, LimitScope, Queue
from .queue_names import DEFAULT_QUEUE, name_errors
from .registry import type_name_errors
from .state import JobValidationError, wake_workers


class UnknownQueue(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"No queue named {name!r}: no unfinished job names it and it was never paused."
        )
        self.name = name


def pause(name: str) -> dict[str, Any]:
    """Pause a queue (idempotent): its pending jobs stay pending until it is resumed."""
    return _set_paused(name, True)


def resume(name: str) -> dict[str, Any]:
    """Resume a queue (idempotent); the workers are woken to load its jobs."""
    return _set_paused(name, False)


def _set_paused(name: str, paused: bool) -> dict[str, Any]:
    if wrong := name_errors(name):
        raise JobValidationError({"name": wrong})
    with transaction.atomic():
        stored = Queue.objects.select_for_update().filter(name=name).first()
        was_paused = stored is not None and stored.paused
        # A queue no job names yet may be paused too: before its first jobs arrive.
        # `updated_at` says since when the queue is as it is: a repeated pause keeps it.
        if stored is None or was_paused != paused:
            Queue.objects.update_or_create(
                name=name, defaults={"paused": paused, "updated_at": timezone.now()}
            )
        audit.record(
            "queue_pause" if paused else "queue_resume",
            target=queue_target(name),
            summary=f"{'Paused' if paused else 'Resumed'} queue {name}",
            before={"paused": was_paused},
            after={"paused": paused},
        )
        if not paused:
            wake_workers()
    return queue_overview(name)


def queue_target(name: str) -> str:
    """How the audit log names a queue (the target its entries are found by)."""
    return f"queue {name}"


def paused_queues() -> set[str]:
    return set(Queue.objects.filter(paused=True).values_list("name", flat=True))


# Unfinished jobs per queue and state, from the rows not yet finished only (never the history).
_COUNTS = """
SELECT queue,
       count(*) FILTER (WHERE status = 'pending' AND pending_dependencies = 0) AS pending,
       count(*) FILTER (WHERE status = 'pending' AND pending_dependencies > 0) AS blocked,
       count(*) FILTER (WHERE status = 'processing') AS processing,
       count(*) FILTER (WHERE status = 'failed' AND NOT in_dlq) AS retrying,
       count(*) FILTER (WHERE in_dlq) AS dlq
FROM jobs
WHERE status IN ('pending', 'processing', 'failed') AND (%(name)s::text IS NULL OR queue = %(name)s)
GROUP BY queue
"""
_COUNTED = ("pending", "blocked", "processing", "retrying", "dlq")


def queue_overviews(name: str | None = None) -> list[dict[str, Any]]:
    """Every queue that has unfinished jobs, was ever paused or resumed, and `default`: its
    name, whether it is paused (and since when it is as it is), and its unfinished jobs."""
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS, {"name": name})
        counts = {row[0]: dict(zip(_COUNTED, row[1:], strict=True)) for row in cursor.fetchall()}
    rows = Queue.objects.all() if name is None else Queue.objects.filter(name=name)
    decided: dict[str, tuple[bool, datetime | None]] = {
        row.name: (row.paused, row.updated_at) for row in rows
    }
    names = set(counts) | set(decided)
    if name in (None, DEFAULT_QUEUE):
        names.add(DEFAULT_QUEUE)
    empty = dict.fromkeys(_COUNTED, 0)
    return [
        {
            "name": queue,
            "paused": decided.get(queue, (False, None))[0],
            "changed_at": decided.get(queue, (False, None))[1],
            **counts.get(queue, empty),
        }
        for queue in sorted(names)
    ]


def queue_overview(name: str) -> dict[str, Any]:
    """The queue `name`, as `queue_overviews` knows queues. Raises UnknownQueue for any other
    (a queue only a limit names included), and for a name no queue can have (one with NUL,
    which PostgreSQL cannot even compare)."""
    found = [] if name_errors(name) else queue_overviews(name)
    if not found:
        raise UnknownQueue(name)
    return found[0]


# --- limits ----------------------------------------------------------------------------------


class UnknownLimit(LookupError):
    def __init__(self, scope: str, name: str) -> None:
        super().__init__(f"No limit on {scope} {name!r}.")


MAX_LIMIT = 1_000_000
# The day `scheduler_limit_room` keeps past starts for (`schema.sql`): a longer period would
# count fewer starts than were made.
MAX_PERIOD_SECONDS = 86_400


def set_limit(
    scope: str,
    name: str,
    *,
    max_running: int | None = None,
    max_starts: int | None = None,
    period_seconds: int | None = None,
) -> dict[str, Any]:
    """Create or replace the limit on the jobs of one type (`scope="type"`) or one queue:
    at most `max_running` running at once, at most `max_starts` starts in any
    `period_seconds`. Either or both. Raises JobValidationError (field -> messages)."""
    errors = limit_errors(scope, name, max_running, max_starts, period_seconds)
    if errors:
        raise JobValidationError(errors)
    with transaction.atomic():
        stored = Limit.objects.select_for_update().filter(scope=scope, name=name).first()
        saved, created = Limit.objects.update_or_create(
            scope=scope,
            name=name,
            defaults={
                "max_running": max_running,
                "max_starts": max_starts,
                "period_seconds": period_seconds if max_starts is not None else None,
                "updated_at": timezone.now(),
            },
        )
        if created:
            _forget_past_starts(saved.id)
        audit.record(
            "limit_create" if created else "limit_change",
            target=_limit_target(scope, name),
            summary=f"Limit on {scope} {name}",
            before=_limit_state(stored) if stored is not None else None,
            after=_limit_state(saved),
        )
    return limit_usage(scope, name)


def limit_errors(
    scope: str,
    name: str,
    max_running: int | None,
    max_starts: int | None,
    period_seconds: int | None,
) -> dict[str, list[str]]:
    """Field -> messages for a limit that cannot be set; empty when it can."""
    errors = limit_name_errors(scope, name)
    for field, value, top in (
        ("max_running", max_running, MAX_LIMIT),
        ("max_starts", max_starts, MAX_LIMIT),
        ("period_seconds", period_seconds, MAX_PERIOD_SECONDS),
    ):
        # Whole numbers from Python callers too: 2.5 was stored as 2, without a word.
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top
        ):
            errors[field] = [f"Must be an integer from 1 to {top}."]
    if max_running is None and max_starts is None:
        errors.setdefault("max_running", []).append("Give max_running, max_starts, or both.")
    if (max_starts is None) != (period_seconds is None):
        errors.setdefault("period_seconds", []).append("max_starts and period_seconds go together.")
    return errors


def _stored_limit(scope: str, name: str) -> bool:
    # A NUL cannot be sent to PostgreSQL as text: no stored limit has one.
    return "\x00" not in name and Limit.objects.filter(scope=scope, name=name).exists()


def limit_name_errors(scope: str, name: str) -> dict[str, list[str]]:
    """Field -> messages for what no limit can be on: a limit on a job type takes any name a
    type can have (one not registered yet too: a limit may come before a deploy), a limit on
    a queue any name a queue can have."""
    errors: dict[str, list[str]] = {}
    if scope not in LimitScope.values:
        errors["scope"] = [f"Must be one of: {', '.join(LimitScope.values)}."]
    elif wrong := type_name_errors(name) if scope == LimitScope.TYPE else name_errors(name):
        errors["name"] = wrong
    return errors


def remove_limit(scope: str, name: str) -> None:
    """Remove a limit; its jobs start as fast as workers take them. Idempotent. Raises
    JobValidationError when `scope` or `name` could name no limit, except for a limit
    stored under a rule since narrowed (a queue of dots alone, set before migration 0054):
    it can still be removed."""
    errors = limit_name_errors(scope, name)
    if errors and not (set(errors) == {"name"} and _stored_limit(scope, name)):
        raise JobValidationError(errors)
    with transaction.atomic():
        # FOR NO KEY UPDATE: the foreign key of the starts a claim is committing takes a key
        # share of this row, which FOR UPDATE would make it wait for while this waits for it.
        stored = Limit.objects.select_for_update(no_key=True).filter(scope=scope, name=name).first()
        if stored is None:
            return
        # The lock a claim counting under this limit holds until it commits its starts
        # (`scheduler_limit_room`): the limit goes once those starts are in, and a claim
        # after this one finds no limit. Deleted under such a claim, the limit broke the
        # starts' foreign key, and the worker took the failed claim for a lost database.
        with connection.cursor() as cursor:
            cursor.execute("SELECT FROM scheduler_limit_room(ARRAY[%s]::bigint[])", [stored.id])
        stored.delete()
        _forget_past_starts(stored.id)
        audit.record(
            "limit_delete",
            target=_limit_target(scope, name),
            summary=f"Limit on {scope} {name}",
            before=_limit_state(stored),
        )


def _forget_past_starts(limit_id: int) -> None:
    # No foreign key deletes them (`job_limit_past_starts`, `schema.sql`), and a flush that
    # restarts the ids leaves the rows of an earlier limit under a new limit's id.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM job_limit_past_starts WHERE limit_id = %s", [limit_id])


def _limit_target(scope: str, name: str) -> str:
    return f"limit {scope} {name}"


def _limit_state(limit: Limit) -> dict[str, int | None]:
    return {
        "max_running": limit.max_running,
        "max_starts": limit.max_starts,
        "period_seconds": limit.period_seconds,
    }


# Each limit with its use now: jobs running, and starts within its period, as the claim
# counts them.
_USAGE = """
SELECT l.scope, l.name, l.max_running, l.max_starts, l.period_seconds, l.updated_at,
       (SELECT count(*) FROM jobs j
        WHERE j.status = 'processing'
          AND CASE l.scope WHEN 'type' THEN j.type = l.name ELSE j.queue = l.name END)
           AS running,
       scheduler_limit_starts(l.id, clock_timestamp() - l.period_seconds * interval '1 second')
           AS recent_starts
FROM job_limits l
WHERE (%(scope)s::text IS NULL OR (l.scope = %(scope)s AND l.name = %(name)s))
ORDER BY l.scope, l.name
"""
_USAGE_COLUMNS = (
    "scope",
    "name",
    "max_running",
    "max_starts",
    "period_seconds",
    "updated_at",
    "running",
    "recent_starts",
)


def limit_usages(scope: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
    """Every limit (or the one on `scope` `name`) with its current use: `running` against
    `max_running`, `recent_starts` (in the last `period_seconds`) against `max_starts`."""
    with connection.cursor() as cursor:
        cursor.execute(_USAGE, {"scope": scope, "name": name})
        return [dict(zip(_USAGE_COLUMNS, row, strict=True)) for row in cursor.fetchall()]


def limit_usage(scope: str, name: str) -> dict[str, Any]:
    """The limit on `scope` `name` with its use. Raises UnknownLimit when there is none, a
    scope or name no limit can have (one with NUL, which PostgreSQL cannot even compare)
    included."""
    found = [] if limit_name_errors(scope, name) else limit_usages(scope, name)
    if not found:
        raise UnknownLimit(scope, name)
    return found[0]
