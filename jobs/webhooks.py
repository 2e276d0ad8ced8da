"""Notification webhooks: every matching event becomes an `http_request` job.

A delivery is an ordinary job, so it is retried with backoff and lands in the DLQ like any
other. Its payload carries the exact body to send (`body`, a string), so that the signature
`X-Scheduler-Signature: sha256=<HMAC-SHA256 of the body with the webhook's secret>` is made
over the bytes the receiver will get. The body names its event (`id`, also in
`X-Scheduler-Event-Id`): every attempt sends the same, and so does every webhook the event
goes to, so that a receiver can tell a delivery it has handled (its answer lost, or a
request replayed) from a new one; signed with the rest, it cannot be changed to look new.

Each attempt goes to the webhook as it is then (`as_it_is_now`, one query): to its current
URL, signed with its current secret, so that a URL moved or a secret rotated (it leaked)
holds for deliveries waiting for their turn, for a retry or in the DLQ too, as Stripe and
Standard Webhooks senders do. Only a body this module made is signed at send time: its
delivery carries a `seal` (an HMAC keyed with Django's SECRET_KEY over its headers and
body), and a request that anyone who may create jobs, or edit a dead letter, wrote naming
the webhook goes to its URL with the signature it carries, so that no one gets a body of
their own signed with a secret they do not know. A delivery to a deleted webhook, or an event's to a
disabled one, is not sent at all.

Dispatch runs in every process that commits transitions (API, console, worker), after each
commit, as a subscriber of `jobs.notifier` (`dispatch_batch`). Each process keeps
the list of active webhooks for `WEBHOOK_CACHE_SECONDS`, so with no webhook an event costs no
query at all; when a webhook matches, one query confirms it is still active and reads it as
it is now (URL, secret, events) before anything is enqueued, so a deleted webhook stops at
once everywhere, a changed one is sent as changed, and a new one starts within the cache
interval. Events about delivery jobs themselves (marked by the `X-Scheduler-Webhook`
header in their payload) are never delivered, so deliveries cannot loop.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models.signals import post_delete, post_migrate, post_save
from django.dispatch import receiver
from django.utils.crypto import constant_time_compare, salted_hmac

from . import outbound, state
from .events import EVENT_TYPES, STATS_UPDATED
from .models import Webhook
from .notifier import Batch, Event

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Scheduler-Signature"
EVENT_HEADER = "X-Scheduler-Event"
EVENT_ID_HEADER = "X-Scheduler-Event-Id"
WEBHOOK_HEADER = "X-Scheduler-Webhook"
TEST_EVENT = "webhook.test"
DELIVERY_TYPE = "http_request"
# Deliveries wait apart from the application's jobs, so that an operator can pause, limit
# or give handler slots to them alone (`runworker --queue webhooks=2`), and at the lowest
# priority, behind the jobs they report on: a receiver that hangs holds each delivery for
# WEBHOOK_TIMEOUT_SECONDS, and at the jobs' own priority its deliveries took every handler
# thread in turn, so the application's jobs ran at the pace of its timeouts.
DELIVERY_QUEUE = "webhooks"
EVENT_PRIORITY = 3
# The most a delivery's payload holds (`http_request`'s bound): its body is an event's job,
# whose payload and result may each be at their own bounds, written as a JSON string, in
# which escaping can double them (every `"` becomes `\"`). At POST /jobs's bound, the events
# of a job whose payload was within it were refused, and lost.
DELIVERY_MAX_PAYLOAD_BYTES = 4 * (settings.API_MAX_BODY_BYTES + settings.SCHEDULER_MAX_RESULT_BYTES)
# A test delivery is sent for someone watching the console.
TEST_PRIORITY = 1
# stats.updated fires after nearly every change; as a webhook it would only be noise.
DELIVERABLE_EVENT_TYPES = tuple(t for t in EVENT_TYPES if t != STATS_UPDATED)


def sign(secret: str, body: bytes) -> str:
    """HMAC-SHA256 of `body` keyed with `secret`, as lowercase hex."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _signature(secret: str, body: str) -> str:
    return "sha256=" + sign(secret, body.encode())


_SEAL_SALT = "jobs.webhooks.delivery"


def _seal(headers: dict[str, str], body: str, key: str | bytes) -> str:
    # Over every header but the signature (the webhook's id and the event's type and id
    # included), so that a sealed body cannot be sent as another webhook's or as a test.
    signed = {name: value for name, value in headers.items() if name != SIGNATURE_HEADER}
    message = json.dumps([signed, body], sort_keys=True)
    return salted_hmac(_SEAL_SALT, message, secret=key, algorithm="sha256").hexdigest()


def _sealed(payload: dict[str, Any], headers: dict[str, str]) -> bool:
    """Whether this module made the delivery's headers and body (SECRET_KEY_FALLBACKS
    honoured, as Django's own signing does)."""
    seal, body = payload.get("seal"), payload.get("body")
    if not isinstance(seal, str) or not isinstance(body, str):
        return False
    keys = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return any(constant_time_compare(seal, _seal(headers, body, key)) for key in keys)


# --- managing webhooks ---------------------------------------------------------------------


def validate(url: Any, event_types: Any, secret: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    max_url = Webhook._meta.get_field("url").max_length or 500
    if not isinstance(url, str) or not url.strip():
        errors["url"] = ["This field is required."]
    elif len(url) > max_url:
        errors["url"] = [f"At most {max_url} characters."]
    elif wrong := _url_errors(url.strip()):
        errors["url"] = wrong
    allowed = ", ".join(DELIVERABLE_EVENT_TYPES)
    if not isinstance(event_types, list | tuple) or not event_types:
        errors["event_types"] = [f"Choose at least one of: {allowed}."]
    else:
        unknown = [t for t in event_types if t not in DELIVERABLE_EVENT_TYPES]
        if unknown:
            errors["event_types"] = [f"Unknown event type(s) {unknown}. Choose from: {allowed}."]
    max_secret = Webhook._meta.get_field("secret").max_length or 200
    if not isinstance(secret, str) or not secret.strip():
        errors["secret"] = ["This field is required: deliveries are signed with it."]
    elif secret != secret.strip():
        # Refused rather than trimmed: the receiver signs with the secret as it was given
        # there, and a space picked up by a copy is invisible on both sides.
        errors["secret"] = [
            "Must not begin or end with whitespace: the receiver has to sign with exactly "
            "the same secret, so remove it here (and there, if it has it)."
        ]
    elif len(secret) > max_secret:
        errors["secret"] = [f"At most {max_secret} characters."]
    return errors


def _url_errors(url: str) -> list[str]:
    with suppress(ValueError):  # an unclosed "[": sendable_url names it below
        if "@" in urlsplit(url).netloc:
            return [
                "Must not hold a user name or password (user:password@): deliveries do not "
                "send them, and every viewer sees a delivery's URL. Receivers check the "
                "signature."
            ]
    try:
        sent = outbound.sendable_url(url)
    except outbound.UnsendableURL as unsendable:
        return [str(unsendable)]
    if refused := outbound.url_refusal(sent):
        return [f"Not allowed: {refused}."]
    return []


def create_webhook(*, url: str, event_types: list[str], secret: str, user: Any) -> Webhook:
    """Add an active webhook. Raises JobValidationError(field -> messages) on bad input."""
    errors = validate(url, event_types, secret)
    if errors:
        raise state.JobValidationError(errors)
    return Webhook.objects.create(
        url=url.strip(),
        event_types=list(dict.fromkeys(event_types)),
        secret=secret,
        is_active=True,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def delete_webhook(webhook_id: int) -> None:
    """Remove a webhook; removing one that is already gone is not an error."""
    Webhook.objects.filter(id=webhook_id).delete()


def send_test(webhook: Webhook) -> dict[str, Any]:
    """Enqueue one signed `webhook.test` delivery, due now; returns its job object."""
    spec = delivery_spec(
        webhook.id,
        webhook.url,
        webhook.secret,
        TEST_EVENT,
        {"webhook_id": webhook.id, "message": "Test delivery from the job scheduler."},
        priority=TEST_PRIORITY,
    )
    return state.enqueue(spec.type, spec.payload, priority=spec.priority, queue=spec.queue)


# --- deliveries ----------------------------------------------------------------------------


def delivery_spec(
    webhook_id: int,
    url: str,
    secret: str,
    event_type: str,
    data: dict[str, Any],
    *,
    event_id: str | None = None,
    priority: int = EVENT_PRIORITY,
) -> state.JobSpec:
    """The delivery of one event to one webhook; without `event_id`, an event of its own."""
    event_id = event_id or str(uuid.uuid4())
    body = json.dumps({"id": event_id, "type": event_type, "data": data}, separators=(",", ":"))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "django-job-scheduler-webhooks/1",
        EVENT_HEADER: event_type,
        EVENT_ID_HEADER: event_id,
        WEBHOOK_HEADER: str(webhook_id),
        # Signed again at each attempt with the secret then (`as_it_is_now`); kept for a
        # worker of an earlier version, which sends it as it is.
        SIGNATURE_HEADER: _signature(secret, body),
    }
    payload = {
        "method": "POST",
        "url": url,
        "headers": headers,
        "body": body,
        "timeout": settings.WEBHOOK_TIMEOUT_SECONDS,
        "seal": _seal(headers, body, settings.SECRET_KEY),
    }
    return state.JobSpec(
        type=DELIVERY_TYPE,
        payload=payload,
        priority=priority,
        queue=DELIVERY_QUEUE,
        max_retries=settings.WEBHOOK_MAX_RETRIES,
    )


class Withdrawn(Exception):
    """A delivery not to send; the message says why."""


def as_it_is_now(payload: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The URL and headers an `http_request` job's attempt is sent with: its own, unless it
    names a webhook (`X-Scheduler-Webhook`). Then it goes to the webhook's URL as it is now,
    signed with its secret as it is now when the delivery is sealed (its body and other
    headers stay the delivery's own), and raises Withdrawn when the webhook is deleted, or
    disabled for any delivery but a test one, which an operator asked for, often to check
    the receiver before enabling the webhook again. One query, and none for a request
    naming no webhook."""
    url: str = payload["url"]
    headers: dict[str, str] = dict(payload.get("headers") or {})
    webhook_id = headers.get(WEBHOOK_HEADER)
    if webhook_id is None:
        return url, headers
    gone = Withdrawn(f"webhook {webhook_id} was deleted")
    if not (webhook_id.isascii() and webhook_id.isdigit()):
        raise gone
    webhook = (
        Webhook.objects.filter(id=int(webhook_id)).values_list("is_active", "url", "secret").first()
    )
    if webhook is None:
        raise gone
    active, url, secret = webhook
    if not active and headers.get(EVENT_HEADER) != TEST_EVENT:
        raise Withdrawn(f"webhook {webhook_id} is disabled")
    if _sealed(payload, headers):
        headers[SIGNATURE_HEADER] = _signature(secret, payload["body"])
    return url, headers


def is_delivery(job: dict[str, Any]) -> bool:
    payload = job.get("payload")
    if job.get("type") != DELIVERY_TYPE or not isinstance(payload, dict):
        return False
    headers = payload.get("headers")
    return isinstance(headers, dict) and WEBHOOK_HEADER in headers


@dataclass(frozen=True)
class _Target:
    id: int
    url: str
    secret: str
    event_types: frozenset[str]


class _Wanted(NamedTuple):
    target: _Target
    event_id: str
    event_type: str
    data: dict[str, Any]


class _ActiveWebhooks:
    """The active webhooks as this process last read them, for WEBHOOK_CACHE_SECONDS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: tuple[_Target, ...] = ()
        self._expires = 0.0

    def get(self) -> tuple[_Target, ...]:
        if time.monotonic() < self._expires:
            return self._targets
        with self._lock:
            if time.monotonic() >= self._expires:
                self._targets = tuple(
                    _Target(hook.id, hook.url, hook.secret, frozenset(hook.event_types))
                    for hook in Webhook.objects.filter(is_active=True).order_by("id")
                )
                self._expires = time.monotonic() + settings.WEBHOOK_CACHE_SECONDS
            return self._targets

    def invalidate(self) -> None:
        self._expires = 0.0

    def leave_out(self, webhook_ids: set[int]) -> None:
        """Drop these webhooks until the next read, so that a webhook whose deliveries are
        refused is reported once a read, not once an event."""
        with self._lock:
            self._targets = tuple(t for t in self._targets if t.id not in webhook_ids)


active_webhooks = _ActiveWebhooks()


def dispatch_batch(batch: Batch) -> None:
    """The notifier's subscriber."""
    dispatch(batch.events)


def dispatch(events: Sequence[Event]) -> int:
    """Enqueue a delivery per (event, matching active webhook); returns how many.

    Called after a commit. Never raises: the transition it follows is already done.
    """
    if not events:
        return 0
    try:
        return _dispatch(events)
    except Exception:
        logger.exception("webhook dispatch failed for %d events", len(events))
        return 0


def _dispatch(events: Sequence[Event]) -> int:
    targets = active_webhooks.get()
    if not targets:
        return 0
    wanted: list[_Wanted] = []
    for event_type, data in events:
        if event_type not in DELIVERABLE_EVENT_TYPES or is_delivery(data):
            continue
        matching = [target for target in targets if event_type in target.event_types]
        if matching:
            # One id per event, whichever webhook it goes to: a receiver behind two webhooks
            # (their events overlapping) handles it once.
            event_id = str(uuid.uuid4())
            wanted.extend(_Wanted(target, event_id, event_type, data) for target in matching)
    if not wanted:
        return 0
    # The webhooks as they are now, not as this process last read them: a URL moved or a
    # secret rotated elsewhere (the admin in another process) holds from the next event on.
    current = {
        hook_id: _Target(hook_id, url, secret, frozenset(event_types))
        for hook_id, url, secret, event_types in Webhook.objects.filter(
            id__in={w.target.id for w in wanted}, is_active=True
        ).values_list("id", "url", "secret", "event_types")
    }
    sending = [
        w._replace(target=current[w.target.id])
        for w in wanted
        if w.target.id in current and w.event_type in current[w.target.id].event_types
    ]
    specs = [
        delivery_spec(
            w.target.id, w.target.url, w.target.secret, w.event_type, w.data, event_id=w.event_id
        )
        for w in sending
    ]
    if not specs:
        return 0
    # A worker's bulk completion: its deliveries go in with one INSERT.
    try:
        return len(state.enqueue_many(specs))
    except state.JobValidationError as refused:
        kept = _without_refused(sending, specs, refused.details)
        return len(state.enqueue_many(kept)) if kept else 0


def _without_refused(
    sending: list[_Wanted],
    specs: list[state.JobSpec],
    refused: dict[str, list[str]],
) -> list[state.JobSpec]:
    """`specs` less those enqueue_many refused (keyed "<index>.<field>"): it takes all or
    none, and one refused delivery must not hold back the others. A webhook saved before a
    rule that now refuses its URL is left out until the webhooks are read again, so that it
    is reported once a read, not once an event; any other refusal is of that event alone."""
    refused_indexes = {int(key.partition(".")[0]) for key in refused}
    problems: dict[tuple[_Target, bool], set[str]] = {}
    for key, messages in refused.items():
        index, _, field = key.partition(".")
        target = sending[int(index)].target
        of_its_url = field.startswith("payload.url")
        problems.setdefault((target, of_its_url), set()).update(f"{field}: {m}" for m in messages)
    for (target, of_its_url), reasons in problems.items():
        logger.error(
            "webhook %s (%s): %s: %s",
            target.id,
            target.url,
            f"deliveries refused, none sent for {settings.WEBHOOK_CACHE_SECONDS:g} s"
            if of_its_url
            else "an event's delivery refused",
            " ".join(sorted(reasons)),
        )
    active_webhooks.leave_out({target.id for target, of_its_url in problems if of_its_url})
    return [spec for index, spec in enumerate(specs) if index not in refused_indexes]


@receiver(post_save, sender=Webhook)
@receiver(post_delete, sender=Webhook)
@receiver(post_migrate)
def _forget_cached_webhooks(**kwargs: Any) -> None:
    # post_migrate also follows a flush (tests, reset_db), which empties the table behind
    # the cache's back.
    active_webhooks.invalidate()
