"""A Django Tasks backend: `@task` functions (django-tasks, Django 6.0's `django.tasks`)
become jobs of this scheduler, run by `runworker` like any other.

    TASKS = {"default": {"BACKEND": "jobs.tasks_backend.SchedulerBackend"}}

A task is a job type named by its module path (`myapp.tasks.send_welcome`): the backend
registers that name in `jobs.registry` when the task is declared, with one handler for
every task (`run_task`), so creating, claiming, retrying, the DLQ, the console and the
admin treat it as any job type. A worker that meets the name before the module was
imported imports it (`HandlerRegistry.load`); the `@task` decorator then registers it, or
`load_task` when it was declared on an alias of another backend.

The payload is `{"args", "kwargs", "priority", "run_after", "backend"}`: the call, and
the task's own settings as Django states them (`backend`: the alias it was enqueued
through), so `get_result()` gives back the task as it was enqueued. The job's columns carry
what the scheduler acts on (`job_fields`): its priority band, its scheduled time and its
queue (`queue_name`).

Django's signals: the worker sends `task_started` before each attempt (`run_task`), and
`task_finished` goes out once the task's outcome is committed (`finished_batch`), so that a
receiver reading the result sees it final, as with Django's own backends.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import re
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime
from importlib import import_module
from typing import Any, TypeVar

# Registers django-tasks' check of every TASKS backend (`check()` below), as installing its
# app would (this project does not) and as Django 6.0 does for `django.tasks`: without it,
# `manage.py check` passed settings that then refused every enqueue.
import django_tasks.checks  # noqa: F401
from django.conf import settings
from django.core import checks
from django.db import close_old_connections
from django.db.models import QuerySet
from django.utils import timezone
from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
from django_tasks.backends.base import BaseTaskBackend
from django_tasks.base import Task, TaskError
from django_tasks.exceptions import (
    InvalidTaskBackendError,
    InvalidTaskError,
    TaskResultDoesNotExist,
)
from django_tasks.signals import task_enqueued, task_finished, task_started
from django_tasks.utils import normalize_json
from typing_extensions import ParamSpec

from . import queue_names, state
from .handoff import Handoff
from .models import Job, JobAttempt, JobStatus
from .notifier import Batch
from .registry import JobCancelled, JobContext, UnknownJobType, registry, type_name_errors

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class WorkerLost(Exception):
    """What a task's attempt failed with when its worker stopped reporting while it ran
    (killed, crashed, cut off): never raised, the class a task's `errors` name for such an
    attempt (`jobs.state.rescue_lost`)."""


# What an attempt records for a failure no code raised (so no traceback names its module),
# and the class Django's `TaskError.exception_class_path` names for it. The worker's classes
# are named, not imported: the core imports nothing of the worker.
RECORDED_WITHOUT_TRACE = {
    "HandlerTimeout": "worker.outcome.HandlerTimeout",
    "TransactionLeftOpen": "worker.outcome.TransactionLeftOpen",
    "OutcomeNotRecorded": "worker.completer.OutcomeNotRecorded",
    "WorkerLost": f"{__name__}.{WorkerLost.__qualname__}",
    # A cancel while it ran (or before it started, in its worker's hands).
    "Cancelled": f"{JobCancelled.__module__}.{JobCancelled.__qualname__}",
}

TASK_PAYLOAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "args": {"type": "array", "description": "Positional arguments of the call."},
        "kwargs": {"type": "object", "description": "Keyword arguments of the call."},
        "priority": {
            "type": "integer",
            "minimum": -100,
            "maximum": 100,
            "description": "The task's Django priority (the job's priority is derived from it).",
        },
        "run_after": {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "The task's run_after, as given.",
        },
        "backend": {
            "type": "string",
            "minLength": 1,
            "description": "The TASKS alias it was enqueued through (else its task's own).",
        },
    },
    "additionalProperties": False,
}


def job_priority(task_priority: int) -> int:
    """Django's priority (-100..100, higher runs sooner, default 0) on the scheduler's 1..3
    (1 runs sooner, default 2): above zero is 1, zero is 2, below zero is 3. Within a band
    the order is the scheduler's (deadline: enqueue time + priority x 20 min)."""
    if task_priority > 0:
        return 1
    return 2 if task_priority == 0 else 3


def job_fields(task: Task[Any, Any], now: datetime) -> dict[str, Any]:
    """The job's columns for `task`: the one place Django's task settings are mapped."""
    run_after = task.run_after
    return {
        "priority": job_priority(task.priority),
        # A run_after already past means "now" (enqueue refuses a scheduled_at in the past).
        "scheduled_at": run_after if run_after is not None and run_after > now else None,
        "queue": task.queue_name,
    }


class SchedulerBackend(BaseTaskBackend):
    """OPTIONS: `MAX_RETRIES`, the attempts a task's job gets (default
    `SCHEDULER_DEFAULT_MAX_RETRIES`). QUEUES: the queue names tasks may use, as in Django
    (`["default"]` when not given; an empty list allows any queue name)."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.max_retries: int | None = self.options.get("MAX_RETRIES")
        self.queues_as_written = params.get("QUEUES")

    def check(self, **kwargs: Any) -> Iterator[checks.CheckMessage]:
        """What `manage.py check` finds wrong in this alias's settings: a MAX_RETRIES no job
        can have refuses every enqueue, a queue name none can have every task declared with
        it, and QUEUES written as one string allows its letters."""
        yield from super().check(**kwargs)
        where = f"TASKS[{self.alias!r}]"
        if self.max_retries is not None:
            attempts = state.JobSpec("", {}, max_retries=self.max_retries)
            for wrong in state.spec_errors(attempts, timezone.now()).get("max_retries", []):
                yield checks.Error(
                    f"{where}['OPTIONS']['MAX_RETRIES'] is {self.max_retries!r}: {wrong}",
                    id="jobs.E001",
                )
        if isinstance(self.queues_as_written, str):
            yield checks.Error(
                f"{where}['QUEUES'] is the string {self.queues_as_written!r}, which allows "
                "its letters as queues: write a list of queue names.",
                id="jobs.E002",
            )
            return
        for name in sorted(self.queues, key=str):
            for wrong in queue_names.name_errors(name):
                yield checks.Error(f"{where}['QUEUES'] names {name!r}: {wrong}", id="jobs.E003")

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        if wrong := queue_names.name_errors(task.queue_name):
            raise InvalidTaskError(f"queue_name {task.queue_name!r}: {wrong[0]}")
        if task.func.__module__ == "__main__":
            raise InvalidTaskError(
                f"Task {task.name!r} is defined in __main__ (a script or the shell): a worker "
                "cannot import it, so its jobs would wait forever. Define it in a module of "
                "an installed app."
            )
        if wrong := type_name_errors(task.module_path):
            raise InvalidTaskError(f"Task path {task.module_path!r}: {wrong[0]}")
        _register(task)

    def enqueue(
        self,
        task: Task[P, T],
        args: P.args,  # type: ignore[valid-type]
        kwargs: P.kwargs,  # type: ignore[valid-type]
    ) -> TaskResult[T]:
        self.validate_task(task)
        # Django's own check and error for arguments that are not JSON (a TypeError).
        args, kwargs = normalize_json(args), normalize_json(kwargs)
        payload = {
            "args": args,
            "kwargs": kwargs,
            # Django takes any value equal to a whole number (True, 5.0); it stores the number.
            "priority": int(task.priority),
            "run_after": task.run_after.isoformat() if task.run_after else None,
            "backend": self.alias,
        }
        try:
            job = self._create_job(task, payload)
        except state.JobValidationError as refused:
            raise _in_djangos_terms(refused) from None
        result: TaskResult[T] = TaskResult(
            task=task,
            id=job["id"],
            status=TaskResultStatus.READY,
            enqueued_at=datetime.fromisoformat(job["created_at"]),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def _create_job(self, task: Task[Any, Any], payload: dict[str, Any]) -> state.JobObject:
        fields = job_fields(task, timezone.now())
        try:
            return state.enqueue(task.module_path, payload, max_retries=self.max_retries, **fields)
        except state.JobValidationError as refused:
            if refused.details != {"scheduled_at": [state.NOT_IN_THE_FUTURE]}:
                raise
        # The run_after passed between the reading above and enqueue's own: it is due now, as
        # any run_after already past.
        due_now = {**fields, "scheduled_at": None}
        return state.enqueue(task.module_path, payload, max_retries=self.max_retries, **due_now)

    def get_result(self, result_id: str) -> TaskResult[Any]:
        try:
            job = Job.objects.get(id=uuid.UUID(str(result_id)))
            spec = registry.load(job.type)
        except (ValueError, Job.DoesNotExist, UnknownJobType):
            raise TaskResultDoesNotExist(result_id) from None
        if spec.func is not run_task:
            raise TaskResultDoesNotExist(result_id)
        return _result(job, _alias(job, reader=self.alias))


BACKEND_PATH = f"{SchedulerBackend.__module__}.{SchedulerBackend.__qualname__}"


def _register(task: Task[Any, Any]) -> None:
    """Make the task's module path a job type run by `run_task`."""
    if task.module_path not in registry:
        doc = (task.func.__doc__ or "").strip().split("\n")[0]
        registry.register(
            task.module_path,
            schema=TASK_PAYLOAD_SCHEMA,
            description=doc or f"Django task {task.name}",
            # A job made through the API waits where `enqueue()` would put it.
            queue=task.queue_name,
            checks=TASK_PAYLOAD_CHECKS,
        )(run_task)


def load_task(name: str, named: object) -> None:
    """`jobs.registry`'s loader (added in `JobsConfig.ready`): the task a stored job's type
    names, registered whatever alias it was declared on. Declaring it registers it only on
    an alias of this backend: one moved over with `task.using(backend=...)` had no handler
    in a worker that never enqueued it, and its jobs waited as unhandled forever."""
    if isinstance(named, Task) and named.module_path == name:
        _register(named)


# The task's own names for the job fields Django's checks let through and enqueue refuses.
_TASK_NAMES = {
    "payload": "arguments",
    "scheduled_at": "run_after",
    "queue": "queue_name",
    "max_retries": "MAX_RETRIES",
}


def _in_djangos_terms(refused: state.JobValidationError) -> Exception:
    """What enqueue refused, as Django refuses it: an argument (JSON Python writes but
    PostgreSQL cannot store) is a ValueError beside Django's TypeError for what JSON cannot
    write, a setting of the task (a run_after past the scheduler's years) an
    InvalidTaskError; each named as the caller wrote it (args[0], not payload.args[0])."""
    said = {
        _TASK_NAMES.get(field, field): " ".join(m.removeprefix("payload.") for m in messages)
        for field, messages in refused.details.items()
    }
    if set(said) == {"arguments"}:
        return ValueError(said["arguments"])
    return InvalidTaskError("; ".join(f"{name}: {words}" for name, words in said.items()))


def _task_at(path: str) -> Task[Any, Any]:
    module, _, name = path.rpartition(".")
    found = getattr(import_module(module), name, None)
    if not isinstance(found, Task):
        raise TaskResultDoesNotExist(f"{path} is not a task")
    return found


def _as_enqueued(job: Job, backend: str) -> Task[Any, Any]:
    """The task a job runs, with the settings it was enqueued with, as a record: not made
    with `Task.using`, which judges it by the settings of today. A queue since dropped from
    QUEUES (or one the API was given) made its result unreadable and failed every attempt;
    QUEUES judges what Django enqueues, as Django states it (enqueuing this task again is
    judged), and a job the scheduler holds runs in its queue."""
    declared = _task_at(job.type)
    run_after = job.payload.get("run_after")
    enqueued = copy.copy(declared)  # a frozen dataclass: a copy, set as django-tasks sets one
    for name, value in {
        "priority": job.payload.get("priority", declared.priority),
        "queue_name": job.queue,
        "run_after": datetime.fromisoformat(run_after) if run_after else None,
        "backend": backend,
    }.items():
        object.__setattr__(enqueued, name, value)
    return enqueued


def _alias(job: Job, task: Task[Any, Any] | None = None, reader: str | None = None) -> str:
    """The TASKS alias a task's result names (`backend`: what its `refresh()`, its context
    and a receiver's `get_result()` go through): the one it was enqueued through while that
    still names this scheduler; else (renamed or removed since, or none kept: a job made
    through the API) the backend reading it, else the task's own, else the first alias
    naming this scheduler."""
    enqueued_through = job.payload.get("backend")
    if _names_this_scheduler(enqueued_through):
        return enqueued_through
    if reader is not None:
        return reader
    declared = task or _task_at(job.type)
    for alias in (declared.backend, *task_backends):
        if _names_this_scheduler(alias):
            return alias
    raise InvalidTaskBackendError(f"No TASKS alias names {BACKEND_PATH}.")


def _names_this_scheduler(alias: object) -> bool:
    if not isinstance(alias, str) or alias not in task_backends.settings:
        return False
    try:
        return isinstance(task_backends[alias], SchedulerBackend)
    except InvalidTaskBackendError:  # an alias whose BACKEND cannot be imported
        return False


def _backend_alias(alias: str) -> None:
    """A task job's `backend` (through the API): an alias no worker could run it through
    would fail each attempt, so it is refused."""
    if not _names_this_scheduler(alias):
        ours = [name for name in task_backends if _names_this_scheduler(name)]
        raise ValueError(
            f"{alias!r} is not a TASKS alias of {BACKEND_PATH} (those are: {', '.join(ours)})."
        )


def _run_after(written: str | None) -> None:
    """A task job's `run_after` (through the API): what `get_result()` gives back as the
    task's, so a datetime it can read."""
    if written is None:
        return
    try:
        instant = datetime.fromisoformat(written)
    except ValueError:
        raise ValueError(f"{written!r} is not an ISO 8601 date-time.") from None
    if timezone.is_naive(instant):
        raise ValueError(f"{written!r} names no UTC offset (a naive datetime names no zone).")


# What TASK_PAYLOAD_SCHEMA cannot state (`jobs.registry` runs them once a payload fits it).
TASK_PAYLOAD_CHECKS = {"backend": _backend_alias, "run_after": _run_after}


def _result(job: Job, backend: str, attempts: list[JobAttempt] | None = None) -> TaskResult[Any]:
    """The job as Django's result of its task, enqueued through the alias `backend`;
    `attempts`, the job's attempts in order, when the caller read them already."""
    if attempts is None:
        attempts = list(_attempts().filter(job=job))
    result: TaskResult[Any] = TaskResult(
        task=_as_enqueued(job, backend),
        id=str(job.id),
        status=_status(job),
        enqueued_at=job.created_at,
        started_at=attempts[0].started_at if attempts else None,
        finished_at=job.completed_at or job.cancelled_at or _dead_at(job, attempts),
        last_attempted_at=attempts[-1].started_at if attempts else None,
        args=job.payload.get("args", []),
        kwargs=job.payload.get("kwargs", {}),
        backend=backend,
        errors=[_error(attempt) for attempt in attempts if attempt.error_type],
        worker_ids=[str(attempt.worker_id or "") for attempt in attempts],
    )
    if job.status == JobStatus.COMPLETED:
        object.__setattr__(result, "_return_value", job.result)
    return result


def _attempts() -> QuerySet[JobAttempt]:
    return JobAttempt.objects.order_by("attempt_number", "started_at")


def _status(job: Job) -> TaskResultStatus:
    """A job waiting for a retry is READY again (Django: "ready to be executed again");
    a dead letter and a cancelled job are FAILED (Django has no cancelled state)."""
    if job.status == JobStatus.PROCESSING:
        return TaskResultStatus.RUNNING
    if job.status == JobStatus.COMPLETED:
        return TaskResultStatus.SUCCESSFUL
    if job.status == JobStatus.CANCELLED or job.in_dlq:
        return TaskResultStatus.FAILED
    return TaskResultStatus.READY


def _dead_at(job: Job, attempts: list[JobAttempt]) -> datetime | None:
    return attempts[-1].finished_at if job.in_dlq and attempts else None


def _error(attempt: JobAttempt) -> TaskError:
    recorded, trace = attempt.error_type or "", attempt.stack_trace or ""
    if not trace and recorded in RECORDED_WITHOUT_TRACE:
        # Raised by no code (a timeout, a lost worker, a cancel): no frames to show, only
        # what happened, in the words recorded ("handler ran over its 30 s").
        return TaskError(
            exception_class_path=RECORDED_WITHOUT_TRACE[recorded],
            traceback=attempt.error_message or "",
        )
    return TaskError(
        exception_class_path=_class_path(recorded, trace),
        traceback=trace or f"{recorded}: {attempt.error_message}",
    )


def _class_path(qualname: str, trace: str) -> str:
    """`module.QualName` of the exception, as Django records it. The attempt keeps the
    class's qualified name; Python's traceback prints the module before it on the last
    line naming it (except for builtins), inside the margin it draws around an exception
    group ("  | ExceptionGroup: ..."). The failures no code raised are named by
    `RECORDED_WITHOUT_TRACE`; for any other without a trace, its recorded name is all
    there is."""
    pattern = re.compile(rf"^(?:  \| )?(?:([\w.]+)\.)?{re.escape(qualname)}(?::|$)")
    for line in reversed(trace.splitlines()):
        if match := pattern.match(line):
            return f"{match.group(1) or 'builtins'}.{qualname}"
    return qualname


def run_task(job: JobContext) -> Any:
    """The handler of every task's job type: call the task named by the job's type, after
    sending Django's `task_started`, as its own workers do before each attempt. A receiver
    that raises fails the attempt before the task runs, as it stops Django's own backends.
    `task_finished` is not this thread's: it goes out once the worker has recorded the
    outcome (`finished_batch`)."""
    task = _task_at(job.type)
    args, kwargs = job.payload.get("args", []), job.payload.get("kwargs", {})
    stored = Job.objects.get(id=job.id)
    backend = _alias(stored, task)
    result = _result(stored, backend)
    task_started.send(type(task_backends[backend]), task_result=result)
    context = [TaskContext(task_result=result)] if task.takes_context else []
    # As Django's backends: a tuple is returned as a list, anything else not JSON fails.
    return normalize_json(task.call(*context, *args, **kwargs))


# The events after which a task is finished, and the status its result then has: it
# succeeded, or its last attempt failed (one failed with another left makes it READY again,
# Django's status for a task "ready to be executed again"; a cancelled task was stopped, not
# finished, and Django has no cancel).
_FINISHED_BY = {
    "job.completed": TaskResultStatus.SUCCESSFUL,
    "job.dlq_entry": TaskResultStatus.FAILED,
}


def finished_batch(batch: Batch) -> None:
    """The notifier's subscriber: the tasks a committed transition finished, handed to the
    thread that sends their `task_finished` (`finished_signals`). Called on the thread that
    committed (the worker's completer): it only picks them out."""
    finished_signals.submit(
        [
            (job["id"], status)
            for event, job in batch.events
            if (status := _FINISHED_BY.get(event)) is not None and _is_task(job["type"])
        ]
    )


def _is_task(job_type: str) -> bool:
    return job_type in registry and registry.get(job_type).func is run_task


class FinishedSignals(Handoff[tuple[str, TaskResultStatus]]):
    """The thread that sends this process's `task_finished` signals, in the order their
    outcomes were committed, each with the task's result as `get_result` reads it then.

    Receivers are the application's code, and may be slow (a metrics server, an email): on
    a thread of their own they hold up neither the worker's loop nor its completer's
    reports. A receiver that raises is logged, and the others still hear the signal; the
    outcome is recorded already, and a success failed by a receiver would run the task
    again. What is queued is drained at process exit within `SCHEDULER_SHUTDOWN_GRACE`."""

    THREAD_NAME = "task-finished"
    # Jobs read in one go (two queries: their rows and their attempts).
    MAX_PER_DELIVERY = 500
    WHAT = "task_finished signals"

    def deliver(self, items: Sequence[tuple[str, TaskResultStatus]]) -> None:
        _send_finished(items)

    def delivered(self) -> None:
        # This thread's connection, as a request's: kept in a worker (which keeps its
        # connections), closed where connections are not kept, or broken.
        close_old_connections()

    def flush_at_exit(self) -> None:
        if not self.flush(settings.SCHEDULER_SHUTDOWN_GRACE):
            logger.warning("exiting with task_finished signals not sent")


def _send_finished(finished: Sequence[tuple[str, TaskResultStatus]]) -> None:
    jobs = Job.objects.in_bulk([job_id for job_id, _ in finished])
    attempts: defaultdict[uuid.UUID, list[JobAttempt]] = defaultdict(list)
    for attempt in _attempts().filter(job_id__in=jobs):
        attempts[attempt.job_id].append(attempt)
    for job_id, status in finished:
        job = jobs.get(uuid.UUID(job_id))
        tried = attempts[uuid.UUID(job_id)]
        # Gone (purged), or no longer what the event said (retried from the DLQ since):
        # its result is not this outcome's any more.
        if job is None or _status(job) != status:
            continue
        try:
            backend = _alias(job)
            result = _result(job, backend, tried)
            sender = type(task_backends[backend])
        except Exception:
            logger.exception("task_finished of task %s not sent: its result cannot be read", job.id)
            continue
        for receiver, answer in task_finished.send_robust(sender, task_result=result):
            if isinstance(answer, Exception):
                logger.error(
                    "task_finished receiver %r raised for task %s",
                    receiver,
                    job.id,
                    exc_info=answer,
                )


finished_signals = FinishedSignals()
atexit.register(finished_signals.flush_at_exit)
os.register_at_fork(after_in_child=finished_signals.forget_parent)
