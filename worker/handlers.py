"""The built-in job types. Each handler takes the job's context and returns its result."""

from __future__ import annotations

import email.utils
import json
import random
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from django.conf import settings
from django.core.mail import EmailMultiAlternatives

from jobs import bulk, limits, outbound, webhooks
from jobs.registry import RetryAfter, handler
from worker.backoff import retry_delay

if TYPE_CHECKING:
    from jobs.registry import JobContext


# The jitter of a backoff a handler waits at least (`http_request` told to retry sooner).
_jitter = random.Random()  # noqa: S311 - spreading retries, not security


class HandlerFailure(Exception):
    """A handler's own, expected failure (a non-2xx response, a simulated fault)."""


@handler(
    "send_email",
    schema={
        "type": "object",
        "properties": {
            # The rule the payload check holds. No `format: email`: a JSON Schema
            # validator only annotates formats, so the schema would promise a check that
            # is never made (and the API fuzz, which asserts it, finds the gap).
            "to": {"type": "string", "minLength": 3, "pattern": "@"},
            "from": {"type": "string", "pattern": "@"},
            "subject": {"type": "string", "maxLength": 998},
            "html": {"type": "string"},
            "text": {"type": "string"},
        },
        "required": ["to", "subject"],
        "additionalProperties": False,
    },
    timeout=60,
)
def send_email(job: JobContext) -> dict[str, Any]:
    """Send an email through Django's configured email backend."""
    payload = job.payload
    html = payload.get("html", "")
    message = EmailMultiAlternatives(
        subject=payload["subject"],
        body=payload.get("text", "") or html,
        from_email=payload.get("from") or settings.DEFAULT_FROM_EMAIL,
        to=[payload["to"]],
    )
    if html:
        message.attach_alternative(html, "text/html")
    sent = message.send()
    job.logger.info("sent email to %s", payload["to"])
    return {"sent": sent, "to": payload["to"]}


@handler(
    "http_request",
    schema={
        "type": "object",
        "properties": {
            "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]},
            "url": {
                "type": "string",
                "pattern": outbound.SENDABLE_URL_PATTERN,
                "description": outbound.SENDABLE_URL,
            },
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "json": {},
            # A body sent byte for byte (a signed webhook delivery), instead of `json`.
            "body": {"type": "string"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 300},
            # A webhook's delivery: the scheduler made its body, to be signed at each
            # attempt with the webhook's secret as it is then (`jobs.webhooks`).
            "seal": {"type": "string"},
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    # The host, which only IDNA can judge, refused when the job is created rather than at
    # every attempt into the dead-letter queue.
    checks={"url": outbound.sendable_url},
    timeout=310,
    max_payload_bytes=webhooks.DELIVERY_MAX_PAYLOAD_BYTES,
)
def http_request(job: JobContext) -> dict[str, Any]:
    """Make an HTTP request (webhooks) to a URL that may be an IRI, sent encoded. A non-2xx
    answer (a redirect too: none is followed) or a timeout fails the attempt, and so does a
    target on an internal network (jobs/outbound.py), or a host IDNA cannot encode in a job
    stored before its host was checked when created; a 429 or 503 answer with a Retry-After
    is tried again when it says. A webhook's delivery goes to the webhook's URL, signed with
    its secret, as they are at each attempt, and is not sent once its webhook is deleted."""
    payload = job.payload
    body = None
    try:
        target, headers = webhooks.as_it_is_now(payload)
    except webhooks.Withdrawn as withdrawn:
        job.logger.info("not sent: %s", withdrawn)
        return {"sent": False, "reason": str(withdrawn)}
    if "body" in payload:
        body = payload["body"].encode()
    elif "json" in payload:
        body = json.dumps(payload["json"]).encode()
        headers.setdefault("Content-Type", "application/json")
    try:
        url = outbound.sendable_url(target)
    except outbound.UnsendableURL as exc:
        raise HandlerFailure(f"{target} cannot be sent: {exc}") from exc
    request = urllib.request.Request(  # noqa: S310 - sendable_url allows http(s) only
        url, data=body, headers=headers, method=payload.get("method", "POST")
    )
    try:
        with outbound.urlopen(request, timeout=payload.get("timeout", 10)) as response:
            text = response.read(64 * 1024).decode("utf-8", "replace")
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.close()  # the error holds the open response; the attempt keeps only its status
        answered = f"{target} answered {exc.code} {exc.reason}"
        location = exc.headers.get("Location")
        if 300 <= exc.code < 400 and location:
            # Named in full, so that the operator can tell whether it is the URL to use.
            raise HandlerFailure(
                f"{answered}, pointing to {urljoin(target, location)}; redirects are "
                "not followed: if that is the right address, use it instead"
            ) from exc
        if exc.code == 410 and webhooks.WEBHOOK_HEADER in headers:
            # Gone: the receiver says its endpoint will not come back. Tried nine times over
            # a day, each event then sat in the DLQ; it ends now, unsent, as a delivery to a
            # deleted webhook does. Another request answered 410 fails as any non-2xx.
            job.logger.warning("%s; the delivery is not tried again", answered)
            return {"sent": False, "status": exc.code, "reason": f"{answered}: not tried again"}
        wait = retry_after(exc.headers.get("Retry-After")) if exc.code in (429, 503) else None
        if wait is not None:
            asked = f"{answered}; it asked to be tried again in {wait:g} s"
            # Never sooner than the backoff: a receiver answering "in 1 s" every time (a
            # deploy's load balancer) spent a webhook's nine attempts, which the backoff
            # spreads over a day, in eight seconds.
            backoff = retry_delay(
                job.attempt_number, _jitter, base_seconds=settings.SCHEDULER_BACKOFF_BASE_SECONDS
            ).total_seconds()
            if backoff > wait:
                raise RetryAfter(backoff, f"{asked}; the backoff waits {backoff:.0f} s") from exc
            raise RetryAfter(wait, asked) from exc
        raise HandlerFailure(answered) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, outbound.TargetRefused):
            raise HandlerFailure(str(exc.reason)) from exc
        raise
    job.logger.info("%s %s -> %s", request.method, target, status)
    # The answer's first characters, as the result can hold them (a binary answer's NUL
    # written as its escape).
    return {"status": status, "body": limits.storable_text(text[:2000])}


# A receiver's Retry-After is followed up to this; a longer one waits this long.
RETRY_AFTER_LONGEST = 3600.0


def retry_after(header: str | None) -> float | None:
    """The seconds a Retry-After header asks for (delay-seconds or an HTTP date), at most
    RETRY_AFTER_LONGEST; None without a usable one (the backoff applies then)."""
    if not header:
        return None
    header = header.strip()
    if header.isascii() and header.isdigit():
        seconds = float(header)
    else:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(seconds, RETRY_AFTER_LONGEST) if seconds > 0 else None


@handler(
    "generate_report",
    schema={
        "type": "object",
        "properties": {
            "report": {"type": "string", "minLength": 1},
            "rows": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
            "format": {"enum": ["csv", "json", "pdf"]},
        },
        "required": ["report"],
        "additionalProperties": False,
    },
    timeout=600,
)
def generate_report(job: JobContext) -> dict[str, Any]:
    """Aggregate a synthetic data set into a small report."""
    rows = int(job.payload.get("rows", 1000))
    rng = random.Random(job.payload["report"])  # noqa: S311 - demo data, not security
    total = 0.0
    for index in range(rows):
        total += rng.random()
        if index % 10_000 == 0:
            job.raise_if_cancelled()
    job.logger.info("aggregated %d rows for %s", rows, job.payload["report"])
    return {
        "report": job.payload["report"],
        "format": job.payload.get("format", "json"),
        "rows": rows,
        "mean": round(total / rows, 6),
    }


@handler("noop", schema={"type": "object"}, timeout=30, inline=True)
def noop(job: JobContext) -> None:
    """Do nothing: for benchmarks and smoke tests."""
    return None


@handler(
    "flaky",
    schema={
        "type": "object",
        "properties": {
            "failure_probability": {"type": "number", "minimum": 0, "maximum": 1},
            "sleep_ms": {"type": "integer", "minimum": 0, "maximum": 60_000},
        },
        "additionalProperties": False,
    },
    timeout=120,
)
def flaky(job: JobContext) -> dict[str, Any]:
    """Fail with the given probability (default 0.5), to show retries and the DLQ."""
    sleep_ms = job.payload.get("sleep_ms", 0)
    if sleep_ms:
        time.sleep(sleep_ms / 1000)
    probability = job.payload.get("failure_probability", 0.5)
    if random.random() < probability:  # noqa: S311 - simulated faults
        raise HandlerFailure(f"simulated failure (probability {probability})")
    return {"survived": True}


@handler(
    bulk.BULK_TYPE,
    queue=bulk.BULK_QUEUE,
    internal=True,
    schema={
        "type": "object",
        "properties": {
            "action": {"enum": list(bulk.ACTIONS)},
            "confirmed": {"type": "integer", "minimum": 0},
            "query": {"type": "object", "additionalProperties": {"type": "string"}},
            "dlq": {"type": "boolean"},
            "signature": {"type": ["string", "null"]},
            "search": {"type": "string"},
            "as_of": {"type": "string", "format": "date-time"},
            # Set when a bulk job continues another's (`jobs.bulk.run`).
            "after": {"type": "string", "format": "uuid"},
            "done": {
                "type": "object",
                "properties": {
                    "matched": {"type": "integer", "minimum": 0},
                    "changed": {"type": "integer", "minimum": 0},
                },
                "required": ["matched", "changed"],
                "additionalProperties": False,
            },
        },
        "required": ["action", "query", "as_of"],
        "additionalProperties": False,
    },
)
def bulk_action(job: JobContext) -> dict[str, Any]:
    """Retry, cancel or purge every job a filter matched, in bounded batches (`jobs.bulk`);
    its log shows the progress."""

    def progress(seen: int, changed: int, confirmed: int) -> None:
        job.raise_if_cancelled()
        job.logger.info("%d of %d done (%d changed)", seen, confirmed, changed)

    result = bulk.run(job.payload, progress, job_id=job.id)
    if "continued_in" in result:
        job.logger.info("continued in job %s", result["continued_in"])
    return result
