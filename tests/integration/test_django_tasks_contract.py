"""Django's task contract kept where a worker runs the task: the signals Django's backends
send around a run, and a task enqueued through a backend alias other than the one it was
declared with (`task.using(backend=...)`, as a team moving tasks over one at a time does).

Each attempt runs in this process as `runworker` runs it (claimed, then the job type's
handler called with its `JobContext`), so that a receiver connected here hears it.
"""

from __future__ import annotations

import copy
import logging
import os
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.test import override_settings
from django.utils import timezone
from django_tasks import TaskResult, TaskResultStatus, task_backends
from django_tasks.signals import task_finished, task_started

from jobs import state
from jobs.models import Job, Worker
from jobs.registry import JobContext, registry
from jobs.tasks_backend import SchedulerBackend
from tests.attempts import fail_attempt
from tests.handlers_app import tasks
from worker.outcome import record_of

BACKEND = "jobs.tasks_backend.SchedulerBackend"
# Two attempts: the first failure of a task is retried, the second is its last.
SCHEDULER = {"BACKEND": BACKEND, "OPTIONS": {"MAX_RETRIES": 2}}
LOGGER = logging.getLogger("tests.django_tasks_contract")


@pytest.fixture
def worker(db: None) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname="test-host", pid=os.getpid(), started_at=now, heartbeat_at=now
    )


@pytest.fixture
def heard() -> Iterator[list[tuple[str, type, TaskResult[Any]]]]:
    """What Django's task_started and task_finished receivers hear: (signal, sender,
    result), each result as it was when sent (a run's two signals carry one result, which
    the run updates, as Django's backends do)."""
    received: list[tuple[str, type, TaskResult[Any]]] = []

    def on_started(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        received.append(("started", sender, copy.deepcopy(task_result)))

    def on_finished(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        received.append(("finished", sender, copy.deepcopy(task_result)))

    task_started.connect(on_started, dispatch_uid="contract-test")
    task_finished.connect(on_finished, dispatch_uid="contract-test")
    yield received
    task_started.disconnect(dispatch_uid="contract-test")
    task_finished.disconnect(dispatch_uid="contract-test")


def declare(tasks_setting: dict[str, Any]) -> Iterator[None]:
    with override_settings(TASKS=tasks_setting):
        for alias, backend in tasks_setting.items():
            if backend["BACKEND"] == BACKEND:
                for declared in tasks.TASKS:
                    task_backends[alias].validate_task(declared.using(backend=alias))
        yield
        for declared in tasks.TASKS:
            registry.unregister(declared.module_path)


@pytest.fixture
def scheduler_default(db: None) -> Iterator[None]:
    yield from declare({"default": SCHEDULER})


@pytest.fixture
def scheduler_beside(db: None) -> Iterator[None]:
    # Tasks are declared on "default" (Django's own backend, which runs them at once, keeps
    # no result); "scheduler" is this one.
    yield from declare(
        {
            "default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"},
            "scheduler": SCHEDULER,
        }
    )


def run_attempt(worker: Worker, result_id: str, *, given_up: bool = False) -> Any:
    """Claim the job and run its handler as the worker does; what the handler returns.
    `given_up`: the worker has let the attempt go while it runs (it sets the cancel event
    when the job is cancelled, its claim is lost or its timeout passes)."""
    # Inside a test's transaction the database clock stands at the transaction's start,
    # before the job's Python-side run_at: move run_at back so that the job is due.
    Job.objects.filter(id=result_id).update(run_at=F("run_at") - timedelta(minutes=1))
    (claimed,) = state.claim(worker.id, 1, [uuid.UUID(result_id)])
    context = JobContext(
        claimed.id,
        claimed.type,
        claimed.payload,
        claimed.attempt_id,
        claimed.attempt_number,
        LOGGER,
    )
    if given_up:
        context.cancel_event.set()
    return registry.load(claimed.type).run(context)


def fail_running_attempt(result_id: str, error: BaseException) -> None:
    """Record the running attempt's failure as the worker writes it, due again at once."""
    job = Job.objects.get(id=result_id)
    assert job.current_attempt_id is not None
    written = record_of(error)
    fail_attempt(
        job.id,
        job.current_attempt_id,
        error_type=written.error_type,
        error_message=written.error_message,
        stack_trace=written.stack_trace,
        retry_delay=timedelta(0),
    )


def test_a_run_sends_task_started_then_task_finished_with_the_outcome(
    scheduler_default: None, worker: Worker, heard: list[tuple[str, type, TaskResult[Any]]]
) -> None:
    # As Django's backends do (django-tasks' db_worker, ImmediateBackend): receivers that
    # log, count or track runs hear each run. Before, this backend sent task_enqueued only.
    result = tasks.add.enqueue(2, 3)
    assert run_attempt(worker, result.id) == 5
    assert [(signal, sender) for signal, sender, _ in heard] == [
        ("started", SchedulerBackend),
        ("finished", SchedulerBackend),
    ]
    (_, _, started), (_, _, finished) = heard
    assert started.id == finished.id == result.id
    assert started.task.func is tasks.add.func and started.args == [2, 3]
    assert finished.status == TaskResultStatus.SUCCESSFUL and finished.return_value == 5
    assert finished.attempts == 1 and finished.errors == []
    assert finished.finished_at is not None and finished.started_at is not None
    assert finished.started_at <= finished.finished_at


def test_task_finished_is_sent_once_the_task_is_finished_not_when_an_attempt_is_retried(
    scheduler_default: None, worker: Worker, heard: list[tuple[str, type, TaskResult[Any]]]
) -> None:
    result = tasks.explode.enqueue("boom")
    with pytest.raises(tasks.TaskBoom) as first:
        run_attempt(worker, result.id)
    # The first attempt failed with one left: the task is READY again, not finished.
    assert [(signal, r.status) for signal, _, r in heard] == [("started", TaskResultStatus.RUNNING)]
    fail_running_attempt(result.id, first.value)
    assert tasks.explode.get_result(result.id).status == TaskResultStatus.READY
    with pytest.raises(tasks.TaskBoom) as last:
        run_attempt(worker, result.id)
    assert [(signal, r.status, r.attempts) for signal, _, r in heard] == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("started", TaskResultStatus.RUNNING, 2),
        ("finished", TaskResultStatus.FAILED, 2),
    ]
    finished = heard[-1][2]
    # Each attempt's error, the last one as Django's backends write it.
    assert [e.exception_class for e in finished.errors] == [tasks.TaskBoom] * 2
    assert "tasks.TaskBoom: boom" in finished.errors[-1].traceback
    assert "raise TaskBoom(message)" in finished.errors[-1].traceback
    fail_running_attempt(result.id, last.value)
    assert tasks.explode.get_result(result.id).status == TaskResultStatus.FAILED


def test_a_task_enqueued_through_another_alias_is_read_and_run_through_that_alias(
    scheduler_beside: None, worker: Worker
) -> None:
    # Declared on "default", enqueued on "scheduler": the job is this backend's. Before, its
    # result named "default" as its task's backend, so `refresh()` asked ImmediateBackend
    # (NotImplementedError), and a task taking a context failed every attempt in the worker
    # for the same reason.
    moved = tasks.flaky.using(backend="scheduler")
    result = moved.enqueue("moved")
    read = task_backends["scheduler"].get_result(result.id)
    assert (read.backend, read.task.backend) == ("scheduler", "scheduler")
    assert moved.get_result(result.id).task == read.task
    result.refresh()
    assert result.status == TaskResultStatus.READY
    with pytest.raises(ValueError, match="moved: the first attempt fails") as first:
        run_attempt(worker, result.id)
    fail_running_attempt(result.id, first.value)
    assert run_attempt(worker, result.id) == {
        "label": "moved",
        "attempt": 2,
        "id": result.id,
        "status": "RUNNING",
    }


def test_a_task_finished_receiver_that_raises_does_not_fail_the_run(
    scheduler_default: None, worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    # The task ran and succeeded: a receiver's error is logged to the job, and the attempt
    # still succeeds (failed, it would be retried and the task would run again).
    def broken(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        raise RuntimeError("the metrics server is down")

    task_finished.connect(broken, dispatch_uid="broken-receiver")
    try:
        result = tasks.add.enqueue(1, 2)
        with caplog.at_level(logging.ERROR, logger=LOGGER.name):
            assert run_attempt(worker, result.id) == 3
    finally:
        task_finished.disconnect(dispatch_uid="broken-receiver")
    (logged,) = [r for r in caplog.records if r.name == LOGGER.name]
    assert "task_finished receiver" in logged.getMessage()
    assert logged.exc_info and "the metrics server is down" in str(logged.exc_info[1])


def test_an_attempt_the_worker_gave_up_sends_no_task_finished(
    scheduler_default: None, worker: Worker, heard: list[tuple[str, type, TaskResult[Any]]]
) -> None:
    # Cancelled, timed out or its claim lost while it ran: the worker does not record what
    # the thread returns, so the thread does not announce it as the task's outcome.
    result = tasks.add.enqueue(1, 2)
    assert run_attempt(worker, result.id, given_up=True) == 3
    assert [signal for signal, _, _ in heard] == ["started"]
