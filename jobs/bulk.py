"""Bulk actions on everything a filter matches: retry, cancel or purge all N matching jobs.

An operator confirms the exact count; the action then runs as a job of its own (the
built-in `bulk_action` handler), in bounded batches, each its own short transaction
through the guarded transitions of `jobs.state`, so no request holds a lock for long and
no job is acted on twice: a job that moved on meanwhile simply no longer matches the
transition's guard. Only jobs unchanged since the confirmation are taken (`updated_at`
at most its time), so the action covers what the operator counted, not jobs that arrived
or moved later. Batches follow the primary key (keyset), so each one is an index range.
However many jobs match, no attempt runs long: after `slice_seconds()` a bulk job hands
what is left to a new bulk job (the same selection, the keyset position and the counts so
far), so neither the handler timeout nor the rescue of jobs stuck in processing cuts it.
"""

from __future__ import annotations

import hashlib
import json
import operator
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import audit, state
from .filters import DLQ, JobFilter, status_condition
from .models import IdempotencyKey, Job, JobStatus
from .selectors import id_ends_with

BULK_TYPE = "bulk_action"
# Its type's queue: an operator stopping a flood pauses the flood's queue first, and the
# action that cleans it up must not wait there.
BULK_QUEUE = "bulk"
BATCH = 500


@dataclass(frozen=True)
class Action:
    verb: str  # how a sentence names it: "retried"
    run: Callable[[Sequence[uuid.UUID]], int]
    # The `status` filter values (`jobs.filters`) of the jobs the action applies to; the
    # transition's guard decides anyway.
    statuses: tuple[str, ...]

    @property
    def applies(self) -> Q:
        return reduce(operator.or_, map(status_condition, self.statuses))


def _retry(ids: Sequence[uuid.UUID]) -> int:
    return len(state.retry_many_from_dlq(ids))


def _cancel(ids: Sequence[uuid.UUID]) -> int:
    return len(state.cancel_many(ids, reason="Cancelled by a bulk action"))


ACTIONS = {
    "retry": Action("retried", _retry, (DLQ,)),
    "cancel": Action(
        "cancelled", _cancel, (JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.FAILED)
    ),
    "purge": Action("purged", state.purge_many, (DLQ,)),
}


@dataclass(frozen=True)
class Selection:
    """What a bulk action acts on: the ledger's filter (JobFilter query parameters), or the
    DLQ with an error signature and a search; only jobs unchanged since `as_of`."""

    query: Mapping[str, str]
    dlq: bool = False
    signature: str | None = None
    search: str = ""
    as_of: datetime | None = None

    def as_payload(self) -> dict[str, Any]:
        return {
            "query": dict(self.query),
            "dlq": self.dlq,
            "signature": self.signature,
            "search": self.search,
            "as_of": (self.as_of or timezone.now()).isoformat(),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Selection:
        return cls(
            query=payload.get("query") or {},
            dlq=bool(payload.get("dlq")),
            signature=payload.get("signature"),
            search=payload.get("search") or "",
            as_of=parse_datetime(payload["as_of"]) if payload.get("as_of") else None,
        )

    def jobs(self) -> QuerySet[Job]:
        """The matching jobs (raises JobValidationError for a filter that does not parse)."""
        filterset = JobFilter(dict(self.query), queryset=Job.objects.all())
        errors = JobFilter.unknown(self.query)
        if not filterset.is_valid():
            errors.update(
                {name: [str(e) for e in problems] for name, problems in filterset.errors.items()}
            )
        if errors:
            raise state.JobValidationError(errors)
        jobs = filterset.qs.order_by()
        if self.dlq:
            jobs = jobs.filter(in_dlq=True)
            if self.signature is not None:
                jobs = jobs.filter(
                    error_signature=self.signature if self.signature else None,
                )
            if self.search:
                jobs = jobs.filter(dlq_search(self.search))
        if self.as_of is not None:
            jobs = jobs.filter(updated_at__lte=self.as_of)
        return jobs


def dlq_search(text: str) -> Q:
    """A DLQ search: a job id, or the short id the DLQ's table shows (`selectors.id_ends_with`),
    a job type, or words of the error message or signature. The words are looked for in
    every dead letter, and an id's end in the same rows."""
    text = text.strip()
    try:
        return Q(id=uuid.UUID(text))
    except ValueError:
        pass
    found = Q(type=text) | Q(last_error__icontains=text) | Q(error_signature__icontains=text)
    if (ending := id_ends_with(text)) is not None:
        found |= ending
    return found


def count(action: str, selection: Selection) -> int:
    """The exact number of jobs the action would take now (what the operator confirms)."""
    return selection.jobs().filter(ACTIONS[action].applies).count()


def start(action: str, selection: Selection, confirmed: int) -> dict[str, Any]:
    """Start the bulk action as a job of its own; the audit log records the request once. The
    same confirmation sent twice (a double click, a form sent again) starts one job: its
    payload, the moment it was counted included, is its idempotency key."""
    if action not in ACTIONS:
        raise state.JobValidationError({"action": [f"Must be one of: {', '.join(ACTIONS)}."]})
    payload = {"action": action, "confirmed": confirmed, **selection.as_payload()}
    confirmation = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    spec = state.JobSpec(BULK_TYPE, payload, priority=1, max_retries=3)
    job, created = state.enqueue_once(f"bulk-{confirmation}", spec)
    if not created:
        return job
    audit.record(
        "bulk",
        target=job["id"],
        count=confirmed,
        summary=f"{action} all {confirmed} matching",
        after=payload,
    )
    return job


def slice_seconds() -> float:
    """How long one bulk job works before it hands the rest over: a fifth of the shorter of
    the handler timeout and the time after which a job in processing counts as stuck."""
    return min(settings.SCHEDULER_HANDLER_TIMEOUT, settings.SCHEDULER_STUCK_AFTER) / 5


def run(
    payload: Mapping[str, Any],
    progress: Callable[[int, int, int], None],
    *,
    job_id: uuid.UUID,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Carry out a bulk action, batch after batch; `progress(seen, changed, confirmed)`
    after each, counted since the first job of the action. Safe to run again after a
    crash: what was done no longer matches. Past `slice_seconds()` it hands the rest to a
    new bulk job, whose id the result names (`continued_in`)."""
    action = ACTIONS[payload["action"]]
    handed = IdempotencyKey.objects.filter(key=_continuation_key(job_id)).first()
    if handed is not None:
        # Run again after it had handed over (a crash before it completed): the rest is its
        # continuation's, which counts on from where this job stopped.
        return {"continued_in": str(handed.job_id)}
    jobs = Selection.from_payload(payload).jobs().filter(action.applies)
    done = payload.get("done") or {}
    seen, changed = int(done.get("matched", 0)), int(done.get("changed", 0))
    after = uuid.UUID(payload["after"]) if payload.get("after") else None
    ends = clock() + slice_seconds()
    while True:
        batch = jobs.filter(id__gt=after) if after is not None else jobs
        ids = list(batch.order_by("id").values_list("id", flat=True)[:BATCH])
        if not ids:
            break
        changed += action.run(ids)
        seen += len(ids)
        after = ids[-1]
        progress(seen, changed, int(payload.get("confirmed", 0)))
        if len(ids) == BATCH and clock() >= ends:
            following = {
                **payload,
                "after": str(after),
                "done": {"matched": seen, "changed": changed},
            }
            return {
                "matched": seen,
                action.verb: changed,
                "continued_in": _hand_over(following, job_id),
            }
    return {"matched": seen, action.verb: changed}


def _continuation_key(job_id: uuid.UUID) -> str:
    return f"bulk-continuation-{job_id}"


def _hand_over(payload: dict[str, Any], job_id: uuid.UUID) -> str:
    """Start the bulk job that continues `job_id`'s, once (its idempotency key): two runs of
    `job_id` at once (one rescued while the other finished its batch) start one."""
    try:
        following = state.enqueue(
            BULK_TYPE,
            payload,
            priority=1,
            max_retries=3,
            idempotency_key=_continuation_key(job_id),
        )
    except state.IdempotencyKeyReused as started:
        return str(started.job_id)
    return str(following["id"])
