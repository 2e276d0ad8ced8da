"""The job state machine. Every status change of a job happens here and nowhere else.

Each transition is one guarded statement (see `jobs/sql/queries.sql`): it names the state
it expects, so of two actors racing for a job exactly one wins and the other gets nothing
back. Attempts and logs are written in the same transaction, and the transition's domain
events go to `jobs.notifier`, which hands them to its subscribers only after that
transaction commits. Transitions return the job object of the API (`jobs.representation`),
which is also what their events carry.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from typing import Any, cast
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from . import audit, limits, queue_names
from .models import Job, JobDependency, JobStatus, RecurInterval, Schedule
from .notifier import notifier
from .queue_names import ALL_QUEUES, QueueSelection
from .recurrence import CronRecurrence, RecurringRun, cron_errors, recurrence_of
from .registry import HandlerSpec, UnknownJobType, registry, type_name_errors
from .representation import EncodedJob
from .sql import fetch, fetch_each, query

JobObject = dict[str, Any]
_NEVER = datetime(1970, 1, 1, tzinfo=UTC)
# Workers LISTEN here (worker/wakeup.py): a job became runnable, was cancelled, or "feed".
RUNNABLE_CHANNEL = "scheduler_runnable"
# Above this many jobs in one transaction, one "feed" wakes the workers instead.
_NOTIFY_EACH_UP_TO = 100
# An `Idempotency-Key`: printable ASCII, no space at either end (HTTP would strip it).
IDEMPOTENCY_KEY = re.compile(r"[!-~]([ -~]*[!-~])?")
# What a `scheduled_at` already past is refused with (the Django tasks backend knows it).
NOT_IN_THE_FUTURE = "Must be in the future."
# Most upstream jobs one job may wait for (`depends_on` as a list).
MAX_UPSTREAM = 1000
# Why a pause cancelled a run of its schedule.
SCHEDULE_PAUSED = "Schedule paused."
# The longest cron expression a schedule holds.
CRON_MAX_LENGTH = cast("int", Schedule._meta.get_field("cron").max_length)


class JobError(Exception):
    """Base of the errors a transition raises to its caller."""


class JobValidationError(JobError):
    def __init__(self, details: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in details.items()))
        self.details = details


class JobNotFound(JobError):
    def __init__(self, job_id: object) -> None:
        super().__init__(f"No job with id {job_id}.")
        self.job_id = job_id


class InvalidStateError(JobError):
    """The action does not apply to the job's current state (the API's 409)."""

    def __init__(self, job_id: object, status: str, in_dlq: bool, action: str) -> None:
        where = "in the dead-letter queue" if in_dlq else status
        super().__init__(f"Cannot {action} job {job_id}: it is {where}.")
        self.job_id = job_id
        self.status = "dlq" if in_dlq else status
        self.action = action


class ScheduleNotFound(JobNotFound):
    def __init__(self, schedule_id: object) -> None:
        JobError.__init__(self, f"No schedule with id {schedule_id}.")
        self.job_id = schedule_id


class IdempotencyKeyReused(JobError):
    """A request under an `Idempotency-Key` that a different request already used (a 409)."""

    def __init__(self, key: str, job_id: object) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was already used by a different request, which created "
            f"job {job_id}. Send the same request to get that job, or a new key for a new job."
        )
        self.key = key
        self.job_id = job_id


@dataclass(frozen=True)
class JobSpec:
    """What `enqueue_many` needs for one job; `enqueue` takes the same as arguments."""

    type: str
    payload: dict[str, Any]
    priority: int = 2
    scheduled_at: datetime | None = None
    recur_interval: str | None = None
    max_retries: int | None = None
    # One upstream job, or several (fan-in): this job runs once every one completed.
    depends_on: uuid.UUID | Sequence[uuid.UUID] | None = None
    # A cron schedule (5 fields) on the wall clock of `timezone` (IANA, default UTC): its
    # name, or a `ZoneInfo` (or `datetime.UTC`), stored by its name.
    cron: str | None = None
    timezone: str | tzinfo | None = None
    # None: the queue its type names at registration, else `default`.
    queue: str | None = None


@dataclass(frozen=True)
class ClaimedJob:
    """A job a worker now holds; `attempt_id` is the fencing token of the claim."""

    id: uuid.UUID
    type: str
    payload: dict[str, Any]
    priority: int
    attempt_id: uuid.UUID
    attempt_number: int
    max_retries: int
    job: JobObject = field(repr=False)


@dataclass(frozen=True)
class Success:
    job_id: uuid.UUID
    attempt_id: uuid.UUID
    result: Any
    finished_at: datetime


@dataclass(frozen=True)
class Failure:
    job_id: uuid.UUID
    attempt_id: uuid.UUID
    error_type: str
    error_message: str
    stack_trace: str | None
    retry_delay: timedelta
    finished_at: datetime


@dataclass(frozen=True)
class FailureReport:
    # Each failed job's object: `in_dlq` says whether it waits for a retry or entered the DLQ;
    # a run of a paused schedule that would wait is cancelled in the same transaction, and
    # its object says so.
    failed: list[JobObject]
    # The failures whose attempt had lost its claim (cancelled, rescued): nothing recorded.
    refused: list[Failure]


@dataclass(frozen=True)
class HandBack:
    # Each job handed back (id, type, priority, run_at, created_at), for a scheduler; not a
    # run of a paused schedule, which is cancelled instead.
    returned: list[dict[str, Any]]
    # The (job id, attempt id) whose claim was lost meanwhile (cancelled, rescued).
    refused: list[tuple[uuid.UUID, uuid.UUID]]


@dataclass(frozen=True)
class CompletionReport:
    completed: list[JobObject]
    created: list[JobObject]
    released: list[uuid.UUID]
    # The successes whose attempt had lost its claim (cancelled, rescued): nothing recorded.
    refused: list[Success]


# --- creating jobs -------------------------------------------------------------------------


def spec_errors(spec: JobSpec, now: datetime) -> dict[str, list[str]]:
    """What the job rules find wrong with `spec`, by field (empty: nothing); what every
    creation checks, and what the API adds to the errors of a form it refused."""
    errors: dict[str, list[str]] = {}
    handler = _handler_of(spec.type)
    if handler is None:
        # What no type can be named (not a string, blank, too long) is said so rather than
        # looked up: a list was a TypeError, and a long name came back whole in the message.
        errors["type"] = type_name_errors(spec.type) or [registry.unknown_type_message(spec.type)]
    errors.update(_payload_errors(handler, spec.payload))
    if not _is_integer(spec.priority) or spec.priority not in (1, 2, 3):
        errors["priority"] = ["Must be 1, 2 or 3."]
    if spec.max_retries is not None and (
        not _is_integer(spec.max_retries) or not 1 <= spec.max_retries <= limits.MAX_ATTEMPTS
    ):
        errors["max_retries"] = [f"Must be an integer from 1 to {limits.MAX_ATTEMPTS}."]
    if spec.scheduled_at is not None and (wrong := _instant_errors(spec.scheduled_at, now)):
        errors["scheduled_at"] = wrong
    if spec.recur_interval is not None and spec.recur_interval not in RecurInterval.values:
        errors["recur_interval"] = [f"Must be one of: {', '.join(RecurInterval.values)}."]
    if spec.queue is not None and (wrong := queue_names.name_errors(spec.queue)):
        errors["queue"] = wrong
    several = spec.depends_on is not None and not isinstance(spec.depends_on, uuid.UUID | str)
    if several and not (
        isinstance(spec.depends_on, Sequence) and 1 <= len(spec.depends_on) <= MAX_UPSTREAM
    ):
        errors["depends_on"] = [f"List 1 to {MAX_UPSTREAM} job ids (or give one id)."]
    elif spec.depends_on is not None:
        given: Sequence[Any] = spec.depends_on if several else [spec.depends_on]  # type: ignore[assignment]
        if wrong_ids := [one for one in given if not _is_job_id(one)]:
            errors["depends_on"] = [f"Not a job id: {wrong_ids[0]!r}."]
    if spec.cron is None:
        if spec.timezone is not None:
            errors["timezone"] = ["Only with `cron`: the time zone its slots are read in."]
        return errors
    zone = _zone_name("UTC" if spec.timezone is None else spec.timezone)
    # A zone that is no string is as unknown as any other name (the lookup raised TypeError).
    errors.update(cron_errors(spec.cron, zone if isinstance(zone, str) else str(zone)))
    if isinstance(spec.cron, str) and len(spec.cron) > CRON_MAX_LENGTH:
        errors["cron"] = [f"Must be at most {CRON_MAX_LENGTH} characters."]
    if spec.timezone == "":
        # In the words POST /jobs always gave it (DRF's): a blank name is no zone, not UTC.
        errors["timezone"] = ["This field may not be blank."]
    for name in ("scheduled_at", "recur_interval", "depends_on"):
        if getattr(spec, name) is not None:
            errors[name] = ["Not with `cron`: the cron expression says when each run is due."]
    return errors


def _zone_name(zone: object) -> object:
    """A schedule's time zone as the IANA name it is stored by, when Python code gave a time
    zone that has one: a `ZoneInfo` its key, `datetime.UTC` "UTC" (until session 34 either
    passed validation as its name, and the schedule's creation raised a TypeError). Anything
    else as it came, a name or what validation refuses."""
    if isinstance(zone, ZoneInfo) and zone.key is not None:
        return zone.key
    return "UTC" if zone is UTC else zone


def _handler_of(job_type: object) -> HandlerSpec | None:
    """The handler of a job type that is registered; None for anything else."""
    if not isinstance(job_type, str):
        return None
    try:
        return registry.get(job_type)
    except UnknownJobType:
        return None


def _is_integer(value: Any) -> bool:
    """An int, or a subclass of it such as an `IntegerChoices` member (stored as its int),
    but not a bool: True is no priority, nor a number of attempts."""
    return isinstance(value, int) and not isinstance(value, bool)


def _instant_errors(value: Any, now: datetime) -> list[str]:
    """What is wrong with `value` as the instant a job is due (empty: nothing)."""
    if not isinstance(value, datetime):
        return ["Must be a datetime."]
    if timezone.is_naive(value):
        # Its zone is unknown: taken as UTC, or as TIME_ZONE, it would run hours off.
        return ["Must be timezone-aware (a naive datetime names no zone)."]
    if value <= now:
        return [NOT_IN_THE_FUTURE]
    if not limits.written_year_in_range(value):  # in its own offset, as the API reads it
        return [limits.OUT_OF_RANGE_MESSAGE]
    return []


def _is_job_id(value: Any) -> bool:
    if isinstance(value, uuid.UUID):
        return True
    try:
        uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


def _payload_errors(handler: HandlerSpec | None, payload: Any) -> dict[str, list[str]]:
    """What is wrong with `payload` for a job of `handler`'s type (None: unknown type)."""
    if not isinstance(payload, dict):
        return {"payload": ["Must be a JSON object."]}
    if unstorable := limits.json_errors(payload, name="payload"):
        return {"payload": unstorable}
    # POST /jobs's body limit, for every caller, unless its type says otherwise: a payload is
    # held whole by the worker that runs it and by each page that lists it.
    if handler is not None and handler.max_payload_bytes is not None:
        bound, named = handler.max_payload_bytes, f"{handler.name}'s max_payload_bytes"
    else:
        bound, named = settings.API_MAX_BODY_BYTES, "API_MAX_BODY_BYTES"
    if too_large := limits.size_error(payload, name="payload", max_bytes=bound, setting=named):
        return {"payload": [too_large]}
    return handler.payload_errors(payload) if handler is not None else {}


def _queue_of(spec: JobSpec) -> str:
    if spec.queue is not None:
        return spec.queue
    return registry.get(spec.type).queue or queue_names.DEFAULT_QUEUE


def enqueue(
    type: str,
    payload: dict[str, Any],
    *,
    priority: int = 2,
    scheduled_at: datetime | None = None,
    recur_interval: str | None = None,
    max_retries: int | None = None,
    depends_on: uuid.UUID | Sequence[uuid.UUID] | None = None,
    cron: str | None = None,
    timezone: str | tzinfo | None = None,
    idempotency_key: str | None = None,
    queue: str | None = None,
) -> JobObject:
    """Create a job. Inside a caller's transaction it exists only if that transaction commits.

    With `cron` (and `timezone`) it creates a `Schedule` and returns its first run. With
    `idempotency_key`, a repeat within the key's window returns the job the first request
    created (`enqueue_once`). Raises JobValidationError with field -> messages when any
    argument is wrong.
    """
    spec = JobSpec(
        type,
        payload,
        priority,
        scheduled_at,
        recur_interval,
        max_retries,
        depends_on,
        cron,
        timezone,
        queue,
    )
    if idempotency_key is not None:
        return enqueue_once(idempotency_key, spec)[0]
    return _submit(spec)


def _submit(spec: JobSpec) -> JobObject:
    now = timezone.now()
    errors = spec_errors(spec, now)
    if errors:
        raise JobValidationError(errors)
    return _enqueue(spec, now)


def enqueue_once(key: str, spec: JobSpec) -> tuple[JobObject, bool]:
    """Create the job of `spec` under `key`, or, when a request took `key` within the last
    `SCHEDULER_IDEMPOTENCY_WINDOW` seconds, return the job it created: (job, created).

    Raises IdempotencyKeyReused when that request was a different one (another
    fingerprint), JobValidationError when an argument or the key is wrong.
    """
    now = timezone.now()
    errors = {**spec_errors(spec, now), **idempotency_key_errors(key)}
    if not _only_passed_instants(errors):
        raise JobValidationError(errors)

    def create() -> list[JobObject]:
        if errors:
            raise JobValidationError(errors)
        return [_enqueue(spec, now)]

    (job,), created = _under_key(key, *_fingerprints(partial(_request, spec)), create)
    return job, created


_SCHEDULED_AT = re.compile(r"([0-9]+\.)?scheduled_at")


def _only_passed_instants(errors: Mapping[str, list[str]]) -> bool:
    """Whether a request's only errors (of one job, or "<index>.<field>" of a batch's) are
    `scheduled_at`s that have passed: ahead at the first request, a replay's may have passed
    since. The key decides then, and they are refused only for a request that creates."""
    return all(
        _SCHEDULED_AT.fullmatch(field) and messages == [NOT_IN_THE_FUTURE]
        for field, messages in errors.items()
    )


def enqueue_many_once(
    key: str, specs: Iterable[JobSpec], *, batch_size: int = 1000
) -> tuple[list[JobObject], bool]:
    """`enqueue_many` under `key`, as `enqueue_once` is `enqueue`: a repeat within the window
    returns the jobs the first request created, in order (those purged or pruned since left
    out): (jobs, created). Validated before the key is looked at, as by `enqueue_once`: a
    wrong batch is refused whatever the key holds, and a wrong key with the jobs' errors."""
    _check_batch_size(batch_size)
    now = timezone.now()
    specs = list(specs)
    errors = {**_batch_errors(specs, now), **idempotency_key_errors(key)}
    if not _only_passed_instants(errors):
        raise JobValidationError(errors)

    def create() -> list[JobObject]:
        if errors:
            raise JobValidationError(errors)
        return _create_jobs(specs, now, batch_size)

    fingerprints = _fingerprints(lambda as_given: [_request(spec, as_given) for spec in specs])
    return _under_key(key, *fingerprints, create, batch=True)


def idempotency_key_errors(key: object) -> dict[str, list[str]]:
    """What is wrong with `key` as an idempotency key, as JobValidationError details (the API
    reports it with the body's errors, in one answer)."""
    if isinstance(key, str) and len(key) <= 255 and IDEMPOTENCY_KEY.fullmatch(key):
        return {}
    return {
        "idempotency_key": [
            "Must be 1 to 255 printable ASCII characters, not starting or ending with a space."
        ]
    }


def _under_key(
    key: str,
    fingerprint: str,
    as_given: str,
    create: Callable[[], list[JobObject]],
    *,
    batch: bool = False,
) -> tuple[list[JobObject], bool]:
    """The jobs `create` makes, once per `key` within the idempotency window. A key holds
    `fingerprint`; one written before upstream jobs were a set may hold `as_given`."""
    with transaction.atomic():
        params = {
            "key": key,
            "fingerprint": fingerprint,
            "window": settings.SCHEDULER_IDEMPOTENCY_WINDOW,
        }
        if not fetch("take_idempotency_key", params):
            # The holder's row is locked by the statement above: it stays until we commit.
            (holder,) = fetch("idempotency_key_holder", {"key": key})
            held = holder["job_ids"] or [holder["job_id"]]
            if holder["fingerprint"] not in (fingerprint, as_given):
                raise IdempotencyKeyReused(key, held[0] if held else None)
            return _job_objects(fetch("job_objects", {"job_ids": held})), False
        created = create()
        job_ids = [job["id"] for job in created]
        # A job's key goes with its job (a repeat after its purge creates it anew); a
        # batch's stays for the window, whichever of its jobs are deleted meanwhile.
        fetch(
            "bind_idempotency_key",
            {
                "key": key,
                "job_id": None if batch else job_ids[0],
                "job_ids": job_ids if batch else None,
            },
        )
    return created, True


def _request(spec: object, as_given: bool = False) -> object:
    """What the fingerprint of a request to create `spec` is taken of: its fields, with the
    defaults written out (the number of attempts; the queue, and a schedule's UTC: given or
    left out, the same job) and its upstream jobs as a set (`_upstream_set`). `as_given`:
    the queue, time zone and upstream jobs as they came, which is what keys written before
    those were canonical hold. An item that is no JobSpec as it is."""
    if not isinstance(spec, JobSpec):
        return spec
    request = asdict(replace(spec, max_retries=_max_retries(spec)))
    if not as_given:
        request["depends_on"] = _upstream_set(spec.depends_on)
        if _handler_of(spec.type) is not None:  # any other type is refused once validated
            request["queue"] = _queue_of(spec)
        if spec.cron is not None and spec.timezone is None:
            request["timezone"] = "UTC"
    return request


def _upstream_set(depends_on: Any) -> Any:
    """The upstream jobs of a request as a set, in a canonical form: the same jobs in any
    order, letter case, repeated, or one alone or in a list, wait on the same jobs. One id
    is its string, several their sorted list: the form keys written before held for such a
    request. A value that is no job id, or no list of them, stays as it is."""
    if depends_on is None:
        return None
    try:
        ids = sorted({str(one) for one in _upstream_ids(depends_on)})
    except (TypeError, ValueError, AttributeError):
        return depends_on
    return ids[0] if len(ids) == 1 else ids


def _fingerprints(request: Callable[[bool], object]) -> tuple[str, str]:
    """The fingerprint of `request(False)`, and that of `request(True)`, the request with
    its upstream jobs as given: what a key written before they were a set holds
    (`_under_key` takes either)."""
    canonical, as_given = request(False), request(True)
    fingerprint = _fingerprint(canonical)
    return fingerprint, fingerprint if as_given == canonical else _fingerprint(as_given)


def _fingerprint(request: object) -> str:
    """SHA-256 of the request (a spec's fields, or a list of them) in a canonical form:
    equal requests, equal fingerprints, however their instants and keys were written."""

    def canonical(value: object) -> str:
        return value.astimezone(UTC).isoformat() if isinstance(value, datetime) else str(value)

    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=canonical)
    return hashlib.sha256(text.encode()).hexdigest()


def _enqueue(spec: JobSpec, now: datetime) -> JobObject:
    """Create the validated job of `spec`."""
    if spec.cron is not None:
        return _start_schedule(spec, spec.cron, now)
    if spec.depends_on is None:
        # One statement, with its audit entry when an operator acts, atomic on its own:
        # inside the caller's transaction it commits with it, outside one it commits at
        # once. Its own transaction would only add round trips.
        created = _create(spec, now, pending_dependencies=0, actor=audit.actor_fields())
        notifier.emit_after_commit([("job.created", created)])
        return created
    upstream_ids = _upstream_ids(spec.depends_on)
    with transaction.atomic():
        # Share locks on the upstream rows, in id order (as `complete` takes its rows), order
        # us against their completion or cancellation, and those transitions re-read the
        # edges in a later statement, so none is missed.
        found = {
            row["id"]: row["status"]
            for row in fetch("lock_upstream_jobs", {"job_ids": list(upstream_ids)})
        }
        refused = [f"No job with id {i}." for i in upstream_ids if i not in found] + [
            f"Job {i} is cancelled; it will never complete."
            for i in upstream_ids
            if found.get(i) == JobStatus.CANCELLED
        ]
        if refused:
            raise JobValidationError({"depends_on": refused})
        waiting = sum(1 for i in upstream_ids if found[i] != JobStatus.COMPLETED)
        job_id = _create(spec, now, waiting)["id"]
        JobDependency.objects.bulk_create(
            [JobDependency(job_id=job_id, depends_on_id=u) for u in upstream_ids]
        )
        created = get_job(job_id)  # its object names the edges, written after the row
        _audit_created(job_id)
        notifier.emit_after_commit([("job.created", created)])
    return created


def _audit_created(job_id: uuid.UUID | str) -> None:
    """The audit entry of a job created in several statements, once its edges are written."""
    actor = audit.actor_fields()
    if actor is not None:
        fetch("audit_created_job", {"job_id": job_id, "actor": Jsonb(actor)})


def _upstream_ids(depends_on: uuid.UUID | Sequence[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """The upstream job ids in the order given, each once (one id may come as a string)."""
    if isinstance(depends_on, uuid.UUID | str):
        return (uuid.UUID(str(depends_on)),)
    return tuple(dict.fromkeys(uuid.UUID(str(one)) for one in depends_on))


def _start_schedule(spec: JobSpec, cron: str, now: datetime) -> JobObject:
    """Create the schedule of `spec` and its first run, at its first slot after now."""
    with transaction.atomic():
        schedule = Schedule.objects.create(
            type=spec.type,
            queue=_queue_of(spec),
            payload=spec.payload,
            priority=spec.priority,
            max_retries=spec.max_retries or settings.SCHEDULER_DEFAULT_MAX_RETRIES,
            cron=cron,
            timezone=cast("str", _zone_name(spec.timezone or "UTC")),  # validated: a name
            created_at=now,
            updated_at=now,
        )
        (created,) = _create_schedule_runs(schedule.id, schedule.cron, schedule.timezone, now)
        _audit_created(created["id"])
    return created


def _create_schedule_runs(
    schedule_id: uuid.UUID, cron: str, zone: str, after: datetime
) -> list[JobObject]:
    """The run of the schedule at its first slot after `after`, unless it is paused or has a
    run waiting or running already (then nothing)."""
    slot = CronRecurrence(cron, ZoneInfo(zone)).upcoming(after, 1)
    if not slot:
        return []
    rows = fetch("create_schedule_runs", {"schedule_ids": [schedule_id], "run_at": slot})
    _notify_runnable(rows)
    created = _job_objects(rows)
    notifier.emit_after_commit([("job.created", j) for j in created])
    return created


def _create(
    spec: JobSpec,
    now: datetime,
    pending_dependencies: int,
    actor: dict[str, Any] | None = None,
) -> JobObject:
    """Insert one validated job, waking the workers when it is runnable, and audited as
    created by `actor` when given (`create_job`)."""
    (row,) = fetch(
        "create_job",
        {
            "type": spec.type,
            "queue": _queue_of(spec),
            "payload": Jsonb(spec.payload),
            "priority": spec.priority,
            "max_retries": _max_retries(spec),
            "run_at": spec.scheduled_at or now,
            "recur_interval": spec.recur_interval,
            "now": now,
            "pending_dependencies": pending_dependencies,
            "channel": RUNNABLE_CHANNEL,
            "actor": None if actor is None else Jsonb(actor),
        },
        prepared=True,
    )
    return EncodedJob(row["job"])


def _max_retries(spec: JobSpec) -> int:
    return spec.max_retries or settings.SCHEDULER_DEFAULT_MAX_RETRIES


def enqueue_many(
    specs: Iterable[JobSpec], *, batch_size: int = 1000, idempotency_key: str | None = None
) -> list[JobObject]:
    """Create many independent jobs, all or none: every spec is validated before anything is
    written (JobValidationError keys are "<index>.<field>"). Their job objects, in order.
    With `idempotency_key`, a repeat within the key's window returns the jobs the first
    request created (`enqueue_many_once`).

    One multi-row INSERT per `batch_size` jobs, pipelined (the server writes one batch while
    this process encodes the next and decodes the last one's jobs), and one wake-up of the
    workers per INSERT; each job still has its `job.created`. Inside a caller's transaction
    they exist only if it commits.
    """
    _check_batch_size(batch_size)
    if idempotency_key is not None:
        return enqueue_many_once(idempotency_key, specs, batch_size=batch_size)[0]
    now = timezone.now()
    specs = list(specs)
    if errors := _batch_errors(specs, now):
        raise JobValidationError(errors)
    return _create_jobs(specs, now, batch_size)


def _check_batch_size(batch_size: int) -> None:
    if not _is_integer(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


def _create_jobs(specs: Sequence[JobSpec], now: datetime, batch_size: int) -> list[JobObject]:
    """Insert the validated jobs of a batch (`enqueue_many`)."""
    each_batch = (
        _create_jobs_params(specs[start : start + batch_size], now)
        for start in range(0, len(specs), batch_size)
    )
    created: list[JobObject] = []
    with transaction.atomic():
        for rows in fetch_each("create_jobs", each_batch):
            created += _job_objects(rows)
        notifier.emit_after_commit([("job.created", job) for job in created])
    return created


def _batch_errors(specs: Sequence[object], now: datetime) -> dict[str, list[str]]:
    """What the rules find wrong with the jobs of a batch, keyed "<index>.<field>"; an item
    that is no JobSpec is a TypeError."""
    errors: dict[str, list[str]] = {}
    for index, spec in enumerate(specs):
        if not isinstance(spec, JobSpec):
            raise TypeError(f"enqueue_many: item {index} is a {type(spec).__name__}, not a JobSpec")
        if spec.depends_on is not None:
            errors[f"{index}.depends_on"] = [
                "Not in a batch: a job with a dependency is created on its own."
            ]
        if spec.cron is not None:
            errors[f"{index}.cron"] = ["Not in a batch: a schedule is created on its own."]
        errors.update({f"{index}.{key}": value for key, value in spec_errors(spec, now).items()})
    return errors


def _create_jobs_params(specs: Sequence[JobSpec], now: datetime) -> dict[str, Any]:
    """The parameters of one `create_jobs` statement: its validated jobs as one JSON array."""
    jobs = [
        {
            "type": spec.type,
            "queue": _queue_of(spec),
            "payload": spec.payload,
            "priority": spec.priority,
            "max_retries": _max_retries(spec),
            "run_at": spec.scheduled_at and spec.scheduled_at.isoformat(),
            "recur_interval": spec.recur_interval,
        }
        for spec in specs
    ]
    return {"jobs": json.dumps(jobs), "now": now, "channel": RUNNABLE_CHANNEL, "feed": _FEED}


# --- running jobs ----------------------------------------------------------------------------


def claim(
    worker_id: uuid.UUID,
    limit: int,
    job_ids: Sequence[uuid.UUID] | None = None,
    queues: QueueSelection = ALL_QUEUES,
) -> list[ClaimedJob]:
    """Claim up to `limit` runnable jobs (among `job_ids` when given) of `queues` that are
    not paused, most urgent first.

    Among `job_ids`: one statement, atomic on its own: outside a transaction it commits at
    once, in one round trip (the worker's start latency), and its events follow. Without
    them, the most urgent runnable jobs are read first, as the worker's feeder reads them,
    then claimed among those: a job another claim holds meanwhile is skipped, not replaced.
    """
    if not job_ids:
        due = runnable_jobs(horizon=timezone.now(), limit=limit, queues=queues)
        if not due:
            return []
        job_ids = [row["id"] for row in due]
    rows = fetch(
        "claim_jobs",
        {"worker_id": worker_id, "limit": limit, "job_ids": _array(job_ids), **queues.params()},
        prepared=True,
    )
    claimed = _claimed_jobs(rows)
    notifier.emit_after_commit([("job.started", c.job) for c in claimed])
    return claimed


def held_claims(worker_id: uuid.UUID, job_ids: Sequence[uuid.UUID]) -> list[ClaimedJob]:
    """The jobs among `job_ids` that `worker_id` has claimed, most urgent first.

    For a claim whose answer was lost (its connection broke once the statement was sent):
    the jobs it did claim, which no other worker may take and which their worker has not
    started. Their claim committed without its `job.started`, published now."""
    rows = fetch("held_claims", {"worker_id": worker_id, "job_ids": _array(job_ids)})
    claimed = _claimed_jobs(rows)
    notifier.emit_after_commit([("job.started", c.job) for c in claimed])
    return claimed


def _claimed_jobs(rows: Sequence[Mapping[str, Any]]) -> list[ClaimedJob]:
    """A claim's rows (`id`, `current_attempt_id`, the job object as text) as claimed jobs."""
    return [
        ClaimedJob(
            id=row["id"],
            type=job["type"],
            payload=job["payload"],
            priority=job["priority"],
            attempt_id=row["current_attempt_id"],
            attempt_number=job["attempt_count"],
            max_retries=job["max_retries"],
            job=job,
        )
        for row in rows
        for job in [EncodedJob(row["job"])]
    ]


def complete(successes: Sequence[Success], worker_id: uuid.UUID | None = None) -> CompletionReport:
    """Finish attempts as succeeded. Attempts that lost their claim are refused."""
    if not successes:
        return CompletionReport([], [], [], [])
    # Rows are locked in id order, as `enqueue` locks several upstream jobs: no deadlock.
    successes = sorted(successes, key=lambda s: s.job_id)
    with transaction.atomic(savepoint=False):
        rows = fetch(
            "complete_jobs",
            {
                "job_ids": _array(s.job_id for s in successes),
                "attempt_ids": _array(s.attempt_id for s in successes),
                "results": Jsonb([s.result for s in successes]),
                "finished_at": _array(s.finished_at for s in successes),
                "worker_id": worker_id,
            },
            prepared=True,
        )
        done = [row for row in rows if row["job"] is not None]
        released = [row for row in rows if row["job"] is None]
        completed = _job_objects(done)
        next_runs = _schedule_next_runs(done)
        created = _job_objects(next_runs)
        _notify_runnable(next_runs + released)
        notifier.emit_after_commit(
            [("job.completed", j) for j in completed] + [("job.created", j) for j in created]
        )
    won = {row["attempt_id"] for row in done}
    refused = [s for s in successes if s.attempt_id not in won]
    return CompletionReport(completed, created, [r["id"] for r in released], refused)


def fail(failures: Sequence[Failure]) -> FailureReport:
    """Finish attempts as failed: each job waits its `retry_delay` for its next attempt, or
    enters the DLQ when it has none left. Attempts that lost their claim are refused."""
    if not failures:
        return FailureReport([], [])
    # Rows are locked in id order, as `complete` locks them: no deadlock between the two.
    failures = sorted(failures, key=lambda f: f.job_id)
    with transaction.atomic(savepoint=False):
        rows = fetch(
            "fail_jobs",
            {
                "job_ids": _array(f.job_id for f in failures),
                "attempt_ids": _array(f.attempt_id for f in failures),
                "error_types": [f.error_type[:200] for f in failures],
                "error_messages": [f.error_message for f in failures],
                "stack_traces": [f.stack_trace for f in failures],
                "retry_at": _array(f.finished_at + f.retry_delay for f in failures),
                "finished_at": _array(f.finished_at for f in failures),
            },
            prepared=True,
        )
        failed = _job_objects(rows)
        stopped = _runs_of_paused_schedules([job for job in failed if not job["in_dlq"]])
        events: list[tuple[str, JobObject]] = []
        for job in failed:
            events.append(("job.failed", job))
            if job["id"] not in stopped:
                events.append(("job.dlq_entry" if job["in_dlq"] else "job.retry_scheduled", job))
        notifier.emit_after_commit(events)
        cancelled = {job["id"]: job for job in _cancel_stopped_runs(stopped)}
    won = {row["attempt_id"] for row in rows}
    return FailureReport(
        [cancelled.get(job["id"], job) for job in failed],
        [f for f in failures if f.attempt_id not in won],
    )


def hand_back(claims: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> HandBack:
    """Undo the claims of jobs their worker never started, (job id, attempt id) each: pending
    again, as if never claimed, for any worker to take. Claims lost meanwhile are refused."""
    if not claims:
        return HandBack([], [])
    claims = sorted(claims)
    with transaction.atomic(savepoint=False):
        rows = fetch(
            "hand_back_jobs",
            {
                "job_ids": _array(job_id for job_id, _ in claims),
                "attempt_ids": _array(attempt_id for _, attempt_id in claims),
            },
        )
        returned = _job_objects(rows)
        stopped = _runs_of_paused_schedules(returned)
        again = [row for row in rows if str(row["id"]) not in stopped]
        _notify_runnable(again)
        notifier.emit_after_commit(
            [("job.retry_scheduled", job) for job in returned if job["id"] not in stopped]
        )
        _cancel_stopped_runs(stopped)
    won = {row["attempt_id"] for row in rows}
    return HandBack(again, [claim for claim in claims if claim[1] not in won])


def note_unstarted(claims: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> int:
    """Say of the attempts of `claims` (job id, attempt id) whose job waited in its worker
    for a thread when a cancel took it, that they never started: the cancel, which cannot
    tell, recorded them as cancelled while running. Attempts closed otherwise are left as
    they are. How many now say so."""
    if not claims:
        return 0
    rows = fetch(
        "note_unstarted_cancels",
        {
            "job_ids": _array(job_id for job_id, _ in claims),
            "attempt_ids": _array(attempt_id for _, attempt_id in claims),
        },
    )
    return len(rows)


def append_logs(
    job_id: uuid.UUID, attempt_id: uuid.UUID, entries: Sequence[tuple[datetime, str, str]]
) -> int:
    """Write (time, level, message) lines of a running attempt; 0 once its claim is lost."""
    return append_logs_of([(job_id, attempt_id, entries)])


def append_logs_of(
    attempts: Sequence[tuple[uuid.UUID, uuid.UUID, Sequence[tuple[datetime, str, str]]]],
) -> int:
    """Write the (time, level, message) lines of each running attempt of `attempts` (job
    id, attempt id, lines) in one statement; those of an attempt whose claim is lost are
    not written. How many lines were."""
    lines = [(job_id, attempt_id, *entry) for job_id, attempt_id, e in attempts for entry in e]
    if not lines:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            query("append_logs"),
            {
                "job_ids": _array(line[0] for line in lines),
                "attempt_ids": _array(line[1] for line in lines),
                "created_at": [line[2] for line in lines],
                "levels": [line[3] for line in lines],
                "messages": [line[4] for line in lines],
            },
        )
        return int(cursor.rowcount)


def rescue_lost(
    *, stuck_after: timedelta, worker_timeout: timedelta, watched_since: datetime = _NEVER
) -> list[JobObject]:
    """Return to pending the jobs of dead workers and the jobs stuck in processing.

    Workers silent for `worker_timeout` are marked dead here. Silence and time stuck count
    only from `watched_since`, when the caller last regained the database, and from the
    database server's start: nobody can beat or report while the database is unreachable.
    """
    now = timezone.now()
    return _take_back(
        {
            "stuck_before": now - stuck_after,
            "heartbeat_before": now - worker_timeout,
            "watched_since": watched_since,
            "worker_id": None,
            "requeue": False,
            "reason": "Worker lost: the attempt never reported back.",
        }
    )


def release(worker_id: uuid.UUID, reason: str) -> list[JobObject]:
    """Put a stopping worker's running jobs back to pending (forced shutdown). Their attempts
    are recorded as lost but spend none of their retries: the stop was not their doing."""
    return _take_back(
        {
            "stuck_before": _NEVER,
            "heartbeat_before": _NEVER,
            "watched_since": _NEVER,
            "worker_id": worker_id,
            "requeue": True,
            "reason": reason,
        }
    )


def _take_back(params: dict[str, Any]) -> list[JobObject]:
    with transaction.atomic():
        rows = fetch("rescue_lost_jobs", params)
        jobs = _job_objects(rows)
        stopped = _runs_of_paused_schedules(
            [job for job in jobs if job["status"] == JobStatus.PENDING]
        )
        _notify_runnable(
            [
                row
                for row in rows
                if row["status"] == JobStatus.PENDING and str(row["id"]) not in stopped
            ]
        )
        events: list[tuple[str, JobObject]] = []
        for job in jobs:
            # A release spends no attempt and is counted as no failure: no `job.failed`,
            # and its subscribers hear what a hand-back tells them, that it will run again.
            if not params["requeue"]:
                events.append(("job.failed", job))
            if job["id"] not in stopped:
                events.append(("job.dlq_entry" if job["in_dlq"] else "job.retry_scheduled", job))
        notifier.emit_after_commit(events)
        cancelled = {job["id"]: job for job in _cancel_stopped_runs(stopped)}
    return [cancelled.get(job["id"], job) for job in jobs]


# --- operator actions ------------------------------------------------------------------------


def cancel(job_id: uuid.UUID, reason: str | None = None) -> JobObject:
    """Cancel a pending, running or retry-waiting job, and every job waiting on it."""
    with transaction.atomic():
        before = _audit_status(job_id)
        cancelled = _cancel([job_id], reason)
        if not cancelled:
            raise _refusal(job_id, "cancel")
        job = cancelled[0]
        audit.record(
            "cancel", target=str(job_id), summary=reason or "", before=before, after=_status(job)
        )
    return job


def cancel_many(job_ids: Sequence[uuid.UUID], reason: str | None = None) -> list[JobObject]:
    """Cancel those of `job_ids` that have not finished (and every job waiting on them);
    the others are left as they are."""
    with transaction.atomic():
        return _cancel(job_ids, reason)


def _cancel(job_ids: Sequence[uuid.UUID], reason: str | None) -> list[JobObject]:
    rows = fetch("cancel_job", {"job_ids": list(job_ids), "reason": reason})
    jobs = _job_objects(rows)
    _notify(
        [
            json.dumps({"cancelled": job["id"]})
            for row, job in zip(rows, jobs, strict=True)
            if row["cancelled_attempt_id"] is not None
        ]
    )
    dependents = _cancel_dependents([uuid.UUID(j["id"]) for j in jobs], "was cancelled")
    notifier.emit_after_commit([("job.cancelled", j) for j in [*jobs, *dependents]])
    _skip_cancelled_slots([j for j in jobs if j["schedule_id"] is not None])
    return jobs


def _skip_cancelled_slots(runs: Sequence[JobObject]) -> None:
    """A cancelled run skips its slot, not its series: the schedule of each of `runs`, if it
    is live, gets the run of its first slot after both the cancelled slot and now (a paused
    one waits for its resume, a deleted one is gone). From now alone, a waiting run's slot
    was its own next slot: it was created again at once."""
    if not runs:
        return
    skipped: dict[str, datetime] = {}
    for run in runs:
        slot = datetime.fromisoformat(run["scheduled_at"])
        skipped[run["schedule_id"]] = max(slot, skipped.get(run["schedule_id"], slot))
    now = timezone.now()
    for schedule in fetch("lock_live_schedules", {"schedule_ids": list(skipped)}):
        after = max(now, skipped[str(schedule["id"])])
        _create_schedule_runs(schedule["id"], schedule["cron"], schedule["timezone"], after)


def pause_schedule(schedule_id: uuid.UUID) -> None:
    """Pause a cron schedule: its waiting run is cancelled, and no run is created until it
    is resumed (a run already running finishes, and is the last)."""
    with transaction.atomic():
        schedule = locked_schedule(schedule_id)
        fetch("set_schedule_paused", {"schedule_id": schedule_id, "paused": True})
        cancelled = _cancel_schedule_runs(schedule_id, SCHEDULE_PAUSED)
        _audit_schedule("schedule_pause", schedule_id, schedule, paused=True, runs=cancelled)


def resume_schedule(schedule_id: uuid.UUID) -> None:
    """Resume a cron schedule from its first slot after now: slots passed while it was
    paused are skipped. A schedule with a run waiting or running gets no second one; one
    whose series stopped (its run in the DLQ, or purged from it) starts again."""
    with transaction.atomic():
        schedule = locked_schedule(schedule_id)
        fetch("set_schedule_paused", {"schedule_id": schedule_id, "paused": False})
        created = _create_schedule_runs(
            schedule_id, schedule["cron"], schedule["timezone"], timezone.now()
        )
        _audit_schedule("schedule_resume", schedule_id, schedule, paused=False, runs=created)


def delete_schedule(schedule_id: uuid.UUID) -> None:
    """Delete a cron schedule: its waiting run is cancelled, a run already running finishes
    and is the last, and its past runs stay in the history, no longer naming it."""
    with transaction.atomic():
        schedule = locked_schedule(schedule_id)
        _cancel_schedule_runs(schedule_id, "Schedule deleted.")
        fetch("delete_schedule", {"schedule_id": schedule_id})
        _audit_schedule("schedule_delete", schedule_id, schedule, paused=None)


def locked_schedule(schedule_id: uuid.UUID) -> dict[str, Any]:
    """The schedule's row, locked as its pause, resume or deletion needs: its turn among
    them first (`take_schedule_turn`), then its runs, then its row (a completion of one of
    its runs waits, then sees what they left). Public for a caller that reads the schedule
    before acting on it in one transaction (the admin)."""
    fetch("take_schedule_turn", {"schedule_id": schedule_id})
    locked = fetch("lock_schedule", {"schedule_id": schedule_id})
    if not locked:
        raise ScheduleNotFound(schedule_id)
    return locked[0]


def _audit_schedule(
    action: str,
    schedule_id: uuid.UUID,
    schedule: Mapping[str, Any],
    *,
    paused: bool | None,
    runs: Sequence[JobObject] = (),
) -> None:
    """`paused`: what a pause or resume made of it; None: it was deleted, so the entry keeps
    the whole schedule it was. `runs`: the runs the pause cancelled or the resume created,
    named in the entry: a resume of a running schedule whose series had stopped started it
    again, and is no repeat of the state it found (which records nothing)."""
    after: dict[str, Any] | None = None if paused is None else {"paused": paused}
    if after is not None and runs:
        after["runs"] = [run["id"] for run in runs]
    audit.record(
        action,
        target=f"schedule {schedule_id}",
        summary=f"Schedule {schedule['type']} {schedule['cron']} ({schedule['timezone']})",
        before=dict(schedule) if paused is None else {"paused": schedule["paused"]},
        after=after,
    )


def _cancel_schedule_runs(schedule_id: uuid.UUID, reason: str) -> list[JobObject]:
    """Cancel the schedule's waiting run (and what waits on it); the runs cancelled."""
    rows = fetch("cancel_schedule_runs", {"schedule_id": schedule_id, "reason": reason})
    runs = _job_objects(rows)
    # As any cancel: a job waiting on a cancelled run would otherwise wait for ever.
    dependents = _cancel_dependents([uuid.UUID(j["id"]) for j in runs], "was cancelled")
    notifier.emit_after_commit([("job.cancelled", j) for j in [*runs, *dependents]])
    return runs


def _runs_of_paused_schedules(jobs: Sequence[JobObject]) -> set[str]:
    """The ids of those of `jobs`, just put back to wait for an attempt, that are runs of a
    paused schedule: a pause lets a running run finish, not start again (until session 34
    its retries, or its rescue, ran it while the schedule was paused). The schedules are
    read as a completion reads them (`lock_live_schedules`, after the runs' rows), so a
    pause waiting for one of these runs finds it waiting for its retry and cancels it then.
    A deleted schedule is no run's: its deletion detaches them."""
    schedule_ids = {job["schedule_id"] for job in jobs if job["schedule_id"] is not None}
    if not schedule_ids:
        return set()
    live = fetch("lock_live_schedules", {"schedule_ids": list(schedule_ids)})
    paused = schedule_ids - {str(row["id"]) for row in live}
    return {job["id"] for job in jobs if job["schedule_id"] in paused}


def _cancel_stopped_runs(job_ids: set[str]) -> list[JobObject]:
    """Cancel the runs of `_runs_of_paused_schedules` as their schedule's pause cancels its
    waiting run, and with the events of any cancel; the runs cancelled."""
    if not job_ids:
        return []
    return _cancel(sorted(uuid.UUID(job_id) for job_id in job_ids), SCHEDULE_PAUSED)


def retry_from_dlq(job_id: uuid.UUID) -> JobObject:
    """Give a DLQ job a fresh set of attempts, due now (its history stays)."""
    jobs = retry_many_from_dlq([job_id])
    if not jobs:
        raise _refusal(job_id, "retry")
    return jobs[0]


def retry_many_from_dlq(job_ids: Sequence[uuid.UUID]) -> list[JobObject]:
    """Retry those of `job_ids` that are in the DLQ; the others are left as they are."""
    with transaction.atomic():
        rows = fetch("retry_dlq_job", {"job_ids": list(job_ids)})
        _notify_runnable(rows)
        jobs = _job_objects(rows)
        if jobs:
            target, ids = audit.jobs_target([j["id"] for j in jobs])
            audit.record(
                "retry",
                target=target,
                count=len(jobs),
                before={"status": "dlq", **ids},
                after={"status": JobStatus.PENDING},
            )
        notifier.emit_after_commit([("job.retry_scheduled", j) for j in jobs])
    return jobs


def retry_with_payload(job_id: uuid.UUID, payload: Any) -> JobObject:
    """Replace a dead letter's payload, validated against its type's schema, and retry it.
    The audit log keeps the payload it had."""
    current = Job.objects.filter(id=job_id).values("type").first()
    if current is None:
        raise JobNotFound(job_id)
    if errors := _payload_errors(_stored_type_handler(current["type"]), payload):
        raise JobValidationError(errors)
    with transaction.atomic():
        rows = fetch("edit_dlq_payload", {"job_id": job_id, "payload": Jsonb(payload)})
        if not rows:
            raise _refusal(job_id, "edit")
        audit.record(
            "edit",
            target=str(job_id),
            summary="Payload edited before a retry",
            before={"payload": json.loads(rows[0]["before"])},
            after={"payload": payload},
        )
        return retry_from_dlq(job_id)


def _stored_type_handler(job_type: str) -> HandlerSpec | None:
    """The handler of a stored job's type; None when this process has none (removed in a
    deploy, or run only by other workers): the job still exists, and may be retried."""
    try:
        return registry.load(job_type)
    except UnknownJobType:
        return None


def purge(job_id: uuid.UUID) -> None:
    """Delete a DLQ job with its attempts and logs; jobs waiting on it are cancelled."""
    if not purge_many([job_id]):
        raise _refusal(job_id, "purge")


def purge_many(job_ids: Sequence[uuid.UUID] | None, *, emptied: bool = False) -> int:
    """Purge those of `job_ids` that are in the DLQ, or the whole DLQ when None; `emptied`:
    the audit log records it as the DLQ emptied."""
    with transaction.atomic():
        # Only locked DLQ jobs are targets: a refused purge (the job is not in the DLQ) must
        # not cancel the dependents of a job that stays, nor may a job retried meanwhile.
        in_dlq = Job.objects.select_for_update().filter(in_dlq=True)
        if job_ids is not None:
            in_dlq = in_dlq.filter(id__in=list(job_ids))
        targets = list(in_dlq.values_list("id", flat=True))
        if targets and audit.active():
            _audit_purge(targets, emptied=emptied)
        dependents = _cancel_dependents(targets, "was purged from the dead-letter queue")
        purged = int(fetch("purge_dlq_jobs", {"job_ids": targets})[0]["purged"])
        notifier.emit_after_commit([("job.cancelled", j) for j in dependents], counts_changed=True)
    return purged


def empty_dlq(confirmed: Sequence[uuid.UUID] | None = None) -> int:
    """Purge the whole DLQ, or of it the dead letters an operator confirmed (those still
    there): the console's confirmation counts them, and what arrived since stays."""
    return purge_many(confirmed, emptied=True)


# --- helpers ---------------------------------------------------------------------------------


def _status(job: Mapping[str, Any]) -> dict[str, str]:
    return {"status": "dlq" if job["in_dlq"] else job["status"]}


def _audit_status(job_id: uuid.UUID) -> dict[str, str] | None:
    """The state the audit log records as "before" (read only when someone is acting)."""
    if not audit.active():
        return None
    current = Job.objects.filter(id=job_id).values("status", "in_dlq").first()
    return _status(current) if current else None


def _audit_purge(job_ids: Sequence[uuid.UUID], *, emptied: bool) -> None:
    """A purge deletes the jobs: the entry keeps what they were (the job itself when one)."""
    target, ids = audit.jobs_target(job_ids)
    before: dict[str, Any] = {"status": "dlq", **ids}
    if len(job_ids) == 1:
        before = get_job(job_ids[0])
    audit.record(
        "empty_dlq" if emptied else "purge",
        target=target,
        count=len(job_ids),
        before=before,
        after=None,
    )


def _cancel_dependents(job_ids: Sequence[uuid.UUID], verb: str) -> list[JobObject]:
    if not job_ids:
        return []
    rows = fetch("cancel_dependents", {"job_ids": list(job_ids), "verb": verb})
    return _job_objects(rows)


def _refusal(job_id: uuid.UUID, action: str) -> JobError:
    current = Job.objects.filter(id=job_id).values("status", "in_dlq").first()
    if current is None:
        return JobNotFound(job_id)
    return InvalidStateError(job_id, current["status"], current["in_dlq"], action)


_FEED = '{"feed":true}'


def wake_workers() -> None:
    """Have every worker load the runnable jobs again (a queue was resumed), at commit."""
    _notify([_FEED])


def _notify_runnable(rows: Sequence[Mapping[str, Any]]) -> None:
    """Tell the workers these jobs (rows with id, type, priority, run_at, created_at) are
    runnable from their `run_at` on, so an idle worker starts them at once rather than at its
    next feed."""
    if len(rows) > _NOTIFY_EACH_UP_TO:
        _notify([_FEED])
        return
    _notify(
        [
            json.dumps(
                {
                    "id": str(row["id"]),
                    "type": row["type"],
                    "priority": row["priority"],
                    "run_at": row["run_at"].isoformat(),
                    "created_at": row["created_at"].isoformat(),
                }
            )
            for row in rows
        ]
    )


def _notify(payloads: list[str]) -> None:
    if payloads:
        with connection.cursor() as cursor:
            cursor.execute(
                query("notify_runnable"), {"channel": RUNNABLE_CHANNEL, "payloads": payloads}
            )


def _array(values: Iterable[uuid.UUID | datetime]) -> str:
    """A PostgreSQL array literal of UUIDs or aware times, for a `::uuid[]` or
    `::timestamptz[]` parameter of the worker's statements: psycopg dumps a list element by
    element in Python (~4.5 µs a UUID, ~11 µs a time: a third of the worker's CPU per job
    in a drain), where joining their texts costs ~1 µs each."""
    return "{" + ",".join(map(str, values)) + "}"


def _job_objects(rows: Sequence[Mapping[str, Any]]) -> list[JobObject]:
    """The job objects the statement built (`scheduler_job_object(...)::text AS job`)."""
    return [EncodedJob(row["job"]) for row in rows]


def _schedule_next_runs(completed: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Create the next run of each recurring job among the `completed` rows (those with a
    `scheduled_at`), when its recurrence has one; the rows of the runs created."""
    recurring = [row for row in completed if row["scheduled_at"] is not None]
    if not recurring:
        return []
    after = timezone.now()
    schedule_ids = [row["schedule_id"] for row in recurring if row["schedule_id"] is not None]
    # Shared locks: a pause waits for this transaction, or this one sees the pause.
    schedules = (
        {row["id"]: row for row in fetch("lock_live_schedules", {"schedule_ids": schedule_ids})}
        if schedule_ids
        else {}
    )
    job_ids, run_at = [], []
    for row in recurring:
        run = RecurringRun(row["scheduled_at"], row["recur_interval"])
        if row["schedule_id"] is not None:
            if row["schedule_id"] not in schedules:
                continue  # paused
            schedule = schedules[row["schedule_id"]]
            run = RecurringRun(row["scheduled_at"], None, schedule["cron"], schedule["timezone"])
        recurrence = recurrence_of(run)
        next_at = recurrence.next_run(run, after) if recurrence is not None else None
        if next_at is not None:
            job_ids.append(row["id"])
            run_at.append(next_at)
    if not job_ids:
        return []
    return fetch("schedule_next_runs", {"job_ids": job_ids, "run_at": run_at})


def get_job(job_id: uuid.UUID) -> JobObject:
    rows = fetch("job_object", {"job_id": job_id})
    if not rows:
        raise JobNotFound(job_id)
    return EncodedJob(rows[0]["job"])


# --- what the worker reads -------------------------------------------------------------------


def runnable_jobs(
    *,
    horizon: datetime,
    limit: int,
    job_ids: Sequence[uuid.UUID] | None = None,
    queues: QueueSelection = ALL_QUEUES,
    unhandled_types: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Runnable jobs of `queues` that are not paused, due before `horizon` (among `job_ids`
    when given), most urgent first, as rows of id, type, priority, run_at, created_at; none
    of `unhandled_types`."""
    return fetch(
        "runnable_jobs",
        {
            "horizon": horizon,
            "job_ids": list(job_ids) if job_ids is not None else None,
            "limit": limit,
            "unhandled_types": list(unhandled_types),
            **queues.params(),
        },
        prepared=True,
    )


def lost_claims(
    held: Mapping[uuid.UUID, uuid.UUID], vouch_before: datetime
) -> dict[uuid.UUID, str | None]:
    """Which of the held job id -> attempt id claims are no longer held, each with its job's
    status now (None: deleted). The others are vouched for, those whose heartbeat (or start)
    is older than `vouch_before`: the rescue of stuck jobs leaves them to their worker."""
    rows = fetch(
        "lost_claims",
        {
            "job_ids": list(held),
            "attempt_ids": list(held.values()),
            "vouch_before": vouch_before,
        },
    )
    return {row["job_id"]: row["status"] for row in rows}
