"""The audit log: every operator action, with who, when, from where, what, before and after.

The web layers say who is acting (`acting`, set once per request by
`jobs.api.middleware.AuditActorMiddleware`); the actions themselves record, in their own
transaction (`jobs.state` for jobs, the signals below for configuration), so an action
and its entry commit or roll back together and no surface can forget to log. Outside a
request (a worker, a management command, a bulk action's batches running as a job)
nobody is acting and nothing is recorded: those are the system's work, and a bulk action
was recorded once, when an operator asked for it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models.signals import post_delete, post_save, pre_save
from django.utils import timezone

from .models import ApiToken, AuditEntry, Webhook
from .sql import fetch

# Ids kept in one entry of an action on many jobs; `count` says how many there were.
IDS_KEPT = 100
# What an entry may say was done, for the console's and the admin's filters (others add
# theirs here).
ACTIONS = (
    "create",
    "cancel",
    "retry",
    "purge",
    "empty_dlq",
    "edit",
    "bulk",
    "webhook_create",
    "webhook_change",
    "webhook_delete",
    "queue_pause",
    "queue_resume",
    "limit_create",
    "limit_change",
    "limit_delete",
    "schedule_pause",
    "schedule_resume",
    "schedule_delete",
    "token_revoke",
)
PAGE_SIZE = 50


@dataclass(frozen=True)
class Actor:
    source: str  # AuditSource
    address: str
    # Read when recording: the API authenticates its token inside the view, after the
    # middleware that names the actor has run.
    user: Callable[[], Any]


_actor: ContextVar[Actor | None] = ContextVar("audit_actor", default=None)


@contextmanager
def acting(actor: Actor | None) -> Iterator[None]:
    """Record what happens inside as done by `actor` (None: by the system)."""
    token = _actor.set(actor)
    try:
        yield
    finally:
        _actor.reset(token)


def active() -> bool:
    return _actor.get() is not None


def actor_fields() -> dict[str, Any] | None:
    """Who is acting, as an entry names them (user_id, username, source, address); None
    when nobody is. The statements that write entries themselves (`scheduler_audit_created`)
    take it as JSON."""
    actor = _actor.get()
    if actor is None:
        return None
    user = actor.user()
    signed_in = user is not None and user.is_authenticated
    return {
        "user_id": user.pk if signed_in else None,
        "username": user.get_username() if signed_in else "",
        "source": actor.source,
        "address": actor.address[:64],
    }


def record(
    action: str,
    *,
    target: str = "",
    summary: str = "",
    before: Any = None,
    after: Any = None,
    count: int = 1,
) -> AuditEntry | None:
    """Record `action` as the current actor's; nothing when no one is acting, nor when the
    action changed nothing (`before` given and equal to `after`): a repeated pause or
    resume, of a queue or a schedule, answers as the first did but is not logged again."""
    if before is not None and before == after:
        return None
    actor = actor_fields()
    if actor is None:
        return None
    return AuditEntry.objects.create(
        **actor,
        action=action,
        target=target[:200],
        count=count,
        summary=summary,
        before=before,
        after=after,
    )


def jobs_target(job_ids: Sequence[uuid.UUID | str]) -> tuple[str, dict[str, Any]]:
    """How an entry names the jobs of an action on several: the target, and the ids kept."""
    if len(job_ids) == 1:
        return str(job_ids[0]), {}
    return f"{len(job_ids)} jobs", {"job_ids": [str(i) for i in job_ids[:IDS_KEPT]]}


def entries(
    *,
    action: str = "",
    source: str = "",
    username: str = "",
    target: str = "",
    older_than: int | None = None,
) -> list[AuditEntry]:
    """A page of entries, newest first, matching every filter given; the next page starts
    `older_than` the last id (keyset: no count of a log that may hold millions)."""
    found = AuditEntry.objects.all()
    if action:
        found = found.filter(action=action)
    if source:
        found = found.filter(source=source)
    if username:
        found = found.filter(username=username)
    if target:
        found = found.filter(target=target)
    if older_than is not None:
        found = found.filter(id__lt=older_than)
    return list(found.order_by("-id")[: PAGE_SIZE + 1])


def prune(*, limit: int) -> int:
    """Delete up to `limit` entries past `SCHEDULER_RETAIN_AUDIT` (0 keeps them forever)."""
    seconds = settings.SCHEDULER_RETAIN_AUDIT
    if seconds <= 0:
        return 0
    before = timezone.now() - timedelta(seconds=seconds)
    return int(fetch("prune_audit_log", {"before": before, "limit": limit})[0]["deleted"])


def _webhook_state(webhook: Webhook) -> dict[str, Any]:
    # The secret is never written down, only whether it changed.
    return {
        "url": webhook.url,
        "event_types": webhook.event_types,
        "is_active": webhook.is_active,
        "secret": hashlib.sha256(webhook.secret.encode()).hexdigest()[:12],
    }


def _webhook_saving(sender: Any, instance: Webhook, **kwargs: Any) -> None:
    if active() and instance.pk is not None:
        stored = Webhook.objects.filter(pk=instance.pk).first()
        instance._audit_before = _webhook_state(stored) if stored else None  # type: ignore[attr-defined]


def _webhook_saved(sender: Any, instance: Webhook, created: bool, **kwargs: Any) -> None:
    record(
        "webhook_create" if created else "webhook_change",
        target=f"webhook {instance.pk}",
        summary=f"Webhook to {instance.url}",
        before=getattr(instance, "_audit_before", None),
        after=_webhook_state(instance),
    )


def _webhook_deleted(sender: Any, instance: Webhook, **kwargs: Any) -> None:
    record(
        "webhook_delete",
        target=f"webhook {instance.pk}",
        summary=f"Webhook to {instance.url}",
        before=_webhook_state(instance),
    )


def _token_revoked(sender: Any, instance: ApiToken, origin: Any = None, **kwargs: Any) -> None:
    # A token deleted along with its user goes with that deletion: only a token deleted by
    # itself (one, or a queryset of tokens) is a revocation.
    revoked = isinstance(origin, ApiToken) or getattr(origin, "model", None) is ApiToken
    if not (revoked and active()):
        return
    # Named by its owner and its prefix, as the admin lists it: never by its hash.
    owner = instance.user.get_username()
    record(
        "token_revoke",
        target=f"api token of {owner}",
        summary=f"API token {instance.prefix}… of {owner}",
        before={
            "user": owner,
            "prefix": instance.prefix,
            "created_at": instance.created_at.isoformat(),
            "last_used_at": instance.last_used_at.isoformat() if instance.last_used_at else None,
        },
    )


pre_save.connect(_webhook_saving, sender=Webhook, dispatch_uid="audit_webhook_saving")
post_save.connect(_webhook_saved, sender=Webhook, dispatch_uid="audit_webhook_saved")
post_delete.connect(_webhook_deleted, sender=Webhook, dispatch_uid="audit_webhook_deleted")
post_delete.connect(_token_revoked, sender=ApiToken, dispatch_uid="audit_token_revoked")
