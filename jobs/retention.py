"""Retention: finished jobs older than their retention are deleted with their attempts and
logs, in bounded batches, by one pruner at a time (`worker.maintenance.Pruner` runs it).

- Completed and cancelled jobs go `SCHEDULER_RETAIN_COMPLETED` seconds after they finished.
- Dead-letter jobs stay until an operator retries or purges them, unless
  `SCHEDULER_RETAIN_DLQ` gives them a retention too (counted from their last failure).
- A job that a job still waiting depends on is never deleted: its dependent would lose its
  `depends_on` (and, for one not yet released, the upstream it waits for).
- Workers that stopped, or were declared dead, go `SCHEDULER_RETAIN_COMPLETED` seconds
  after, unless a job is still processing under them (`prune_workers`).
- Expired sessions go, when the session engine keeps them in the database; and the login
  records (django-axes' access log) after `SCHEDULER_RETAIN_AUDIT`, as the audit log's
  entries do. django-axes' attempts stay: they are the lockouts' state, and django-axes
  deletes those past the cool-off itself at every login.

A zero retention keeps those jobs (and workers) forever. Deleting changes the job counters
in the same transaction (the triggers of `job_counts`), so `/jobs/stats` stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import import_module

from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from . import audit
from .models import LastPrune
from .notifier import notifier
from .sql import fetch


@dataclass(frozen=True)
class Retention:
    """How long finished jobs are kept; None keeps them forever."""

    completed: timedelta | None
    dlq: timedelta | None

    @classmethod
    def from_settings(cls) -> Retention:
        return cls(
            completed=_kept_for(settings.SCHEDULER_RETAIN_COMPLETED),
            dlq=_kept_for(settings.SCHEDULER_RETAIN_DLQ),
        )


def _kept_for(seconds: float) -> timedelta | None:
    return timedelta(seconds=seconds) if seconds > 0 else None


@dataclass(frozen=True)
class Pruned:
    jobs: int
    attempts: int
    logs: int
    workers: int
    # A batch was full (of jobs, audit entries, idempotency keys, workers, sessions or login
    # records): more rows past their retention may be waiting.
    more: bool


def prune(*, limit: int, continues: bool, retention: Retention | None = None) -> Pruned | None:
    """Delete up to `limit` jobs past their retention, oldest first, in one transaction.

    None when another pruner holds the turn. A batch that removed jobs is recorded as the
    last prune: a new one, or added to it when `continues` (the previous batch was full).
    Audit entries and login records past `SCHEDULER_RETAIN_AUDIT`, idempotency keys past
    their window, workers stopped longer ago than the completed jobs' retention and expired
    sessions go in the same transaction, up to `limit` of each.
    """
    retention = retention or Retention.from_settings()
    now = timezone.now()
    with transaction.atomic():
        if not fetch("take_prune_turn", {})[0]["ours"]:
            return None
        candidates = fetch(
            "lock_prunable_jobs",
            {
                "finished_before": _before(now, retention.completed),
                "dlq_before": _before(now, retention.dlq),
                "limit": limit,
            },
        )
        row = fetch("prune_jobs", {"job_ids": [r["id"] for r in candidates]})[0]
        # The audit log has its own retention, the idempotency keys their window; a bounded
        # batch of each per pass, like the jobs', and a full one brings the pruner back at
        # once as a full batch of jobs does. Every API-created job is an audit entry: with
        # jobs kept for ever, one batch a pass fell behind any rate above
        # SCHEDULER_PRUNE_BATCH entries per SCHEDULER_PRUNE_INTERVAL, and the log grew
        # without end.
        audited = audit.prune(limit=limit)
        keys = fetch(
            "prune_idempotency_keys",
            {"window": settings.SCHEDULER_IDEMPOTENCY_WINDOW, "limit": limit},
        )[0]["deleted"]
        # A stopped worker's row is history like a finished job's, kept as long: the
        # attempts of the jobs kept name its host until then.
        workers = fetch(
            "prune_workers", {"before": _before(now, retention.completed), "limit": limit}
        )[0]["deleted"]
        # Nothing else deletes them: Django leaves expired sessions to `clearsessions`, and
        # django-axes keeps a row per sign-in for ever. Its attempts stay: they hold the
        # lockouts, and it deletes those past the cool-off itself.
        sessions = (
            fetch("prune_sessions", {"now": now, "limit": limit})[0]["deleted"]
            if _sessions_in_database()
            else 0
        )
        logins = fetch(
            "prune_login_records",
            {"before": _before(now, _kept_for(settings.SCHEDULER_RETAIN_AUDIT)), "limit": limit},
        )[0]["deleted"]
        pruned = Pruned(
            row["deleted_jobs"],
            row["deleted_attempts"],
            row["deleted_logs"],
            workers,
            more=max(len(candidates), audited, keys, workers, sessions, logins) >= limit,
        )
        _record(pruned, now, continues)
        fetch("count_prune", {"jobs": pruned.jobs})
        if pruned.jobs:
            notifier.emit_after_commit([], counts_changed=True)
    return pruned


def _before(now: datetime, kept_for: timedelta | None) -> datetime | None:
    return None if kept_for is None else now - kept_for


def _sessions_in_database() -> bool:
    """Whether the session engine keeps its sessions in `django_session`: Django's `db` and
    `cached_db` do; the cookie, cache and file engines have no expired rows to delete."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    return issubclass(store, DatabaseSessionStore) and store.get_model_class() is Session


def _record(pruned: Pruned, now: datetime, continues: bool) -> None:
    """Only the holder of the prune turn gets here, so the one row has one writer."""
    last, _ = LastPrune.objects.get_or_create(pk=LastPrune.ONLY, defaults={"checked_at": now})
    last.checked_at = now
    if pruned.jobs:
        if not continues or last.started_at is None:
            last.started_at, last.jobs, last.attempts, last.logs = now, 0, 0, 0
        last.finished_at = now
        last.jobs += pruned.jobs
        last.attempts += pruned.attempts
        last.logs += pruned.logs
    last.save()


def last_prune() -> LastPrune | None:
    return LastPrune.objects.filter(pk=LastPrune.ONLY).first()
