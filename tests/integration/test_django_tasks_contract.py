"""Django's task contract kept where a worker runs the task: the signals Django's backends
send around a run, and a task enqueued through a backend alias other than the one it was
declared with (`task.using(backend=...)`, as a team moving tasks over one at a time does).

The signals are heard from a worker run in this process (`Worker(once=True)`), so that a
receiver connected here hears them; the alias test runs one attempt as `runworker` runs it
(claimed, then the job type's handler called with its `JobContext`).
"""

from __future__ import annotations

import copy
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import F
from django.test import override_settings
from django.utils import timezone
from django_tasks import TaskResult, TaskResultStatus, task, task_backends
from django_tasks.signals import task_finished, task_started

from jobs import state, tasks_backend
from jobs.models import Job, JobStatus, Worker
from jobs.registry import JobContext, registry
from jobs.tasks_backend import SchedulerBackend
from tests.attempts import fail_attempt
from tests.conftest import subprocess_environment
from tests.handlers_app import tasks
from tests.integration.conftest import job_status, wait_for
from worker.outcome import record_of
from worker.worker import Worker as WorkerLoop

BACKEND = "jobs.tasks_backend.SchedulerBackend"
# Two attempts: the first failure of a task is retried, the second is its last.
SCHEDULER = {"BACKEND": BACKEND, "OPTIONS": {"MAX_RETRIES": 2}}
LOGGER = logging.getLogger("tests.django_tasks_contract")


@task
def nap(seconds: float) -> str:
    """Sleep, deaf to a cancel or a timeout (a task has no cancel flag to check)."""
    time.sleep(seconds)
    return "rested"


DECLARED = [*tasks.TASKS, nap]


@pytest.fixture
def worker(db: None) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        hostname="test-host", pid=os.getpid(), started_at=now, heartbeat_at=now
    )


@dataclass
class Heard:
    """A signal as a receiver heard it: its result as it was when sent, and for
    `task_finished` what `get_result` said of the task inside the receiver."""

    signal: str
    sender: type
    result: TaskResult[Any]
    read: TaskResult[Any] | None = None


@pytest.fixture
def heard() -> Iterator[list[Heard]]:
    """What Django's task_started and task_finished receivers hear, in order."""
    received: list[Heard] = []

    def on_started(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        received.append(Heard("started", sender, copy.deepcopy(task_result)))

    def on_finished(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        # What a receiver that stores or reports the outcome reads.
        read = task_result.task.get_result(task_result.id)
        received.append(Heard("finished", sender, copy.deepcopy(task_result), read))

    task_started.connect(on_started, dispatch_uid="contract-test")
    task_finished.connect(on_finished, dispatch_uid="contract-test")
    yield received
    task_started.disconnect(dispatch_uid="contract-test")
    task_finished.disconnect(dispatch_uid="contract-test")


def declare(tasks_setting: dict[str, Any]) -> Iterator[None]:
    with override_settings(TASKS=tasks_setting):
        for alias, backend in tasks_setting.items():
            if backend["BACKEND"] == BACKEND:
                for declared in DECLARED:
                    task_backends[alias].validate_task(declared.using(backend=alias))
        yield
        for declared in DECLARED:
            registry.unregister(declared.module_path)


@pytest.fixture
def scheduler_default(db: None) -> Iterator[None]:
    yield from declare({"default": SCHEDULER})


@pytest.fixture
def one_attempt(db: None) -> Iterator[None]:
    yield from declare({"default": {"BACKEND": BACKEND, "OPTIONS": {"MAX_RETRIES": 1}}})


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


def run_worker(worker: WorkerLoop | None = None) -> None:
    """Run a worker in this process until nothing is due, then wait for the task_finished
    signals of what it recorded."""
    assert (worker or WorkerLoop(once=True)).run() == 0
    assert tasks_backend.finished_signals.flush(10)


def run_worker_until_finished(result: TaskResult[Any]) -> None:
    """Run a worker in this process until the task is finished, its retries included (a
    worker run `once` stops before a retry is due)."""
    worker = WorkerLoop()

    def watch() -> None:
        try:
            wait_for(lambda: result.task.get_result(result.id).is_finished, timeout=60)
        finally:
            worker.request_stop()
            connection.close()  # this thread's own

    thread = threading.Thread(target=watch)
    thread.start()
    run_worker(worker)
    thread.join()


def run_attempt(worker: Worker, result_id: str) -> Any:
    """Claim the job and run its handler as the worker does; what the handler returns."""
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


def finished(heard: list[Heard]) -> list[Heard]:
    return [h for h in heard if h.signal == "finished"]


def test_task_finished_is_sent_once_the_outcome_is_recorded(
    scheduler_default: None, transactional_db: None, heard: list[Heard]
) -> None:
    # As Django's own backends do (django-tasks' database backend saves the result, then
    # sends task_finished): a receiver that stores, reports or chains on the outcome reads
    # it final. Before, it was sent from the task's thread before the worker recorded the
    # outcome: get_result() inside the receiver said RUNNING, with no return value.
    result = tasks.add.enqueue(2, 3)
    run_worker()
    assert [(h.signal, h.sender) for h in heard] == [
        ("started", SchedulerBackend),
        ("finished", SchedulerBackend),
    ]
    started, (done,) = heard[0], finished(heard)
    assert started.result.id == done.result.id == result.id
    assert started.result.task.func is tasks.add.func and started.result.args == [2, 3]
    assert started.result.status == TaskResultStatus.RUNNING
    assert done.read is not None and done.read.status == TaskResultStatus.SUCCESSFUL
    assert done.read.return_value == 5
    assert done.result.status == TaskResultStatus.SUCCESSFUL and done.result.return_value == 5
    assert done.result.attempts == 1 and done.result.errors == []
    assert done.result.finished_at is not None and done.result.started_at is not None
    assert done.result.started_at <= done.result.finished_at
    assert done.result.finished_at == Job.objects.get(id=result.id).completed_at


@pytest.mark.slow
def test_a_failed_attempt_with_one_left_sends_no_task_finished(
    scheduler_default: None, transactional_db: None, heard: list[Heard]
) -> None:
    # The first attempt fails, the second succeeds (after the ~1 s backoff): the task was
    # READY again in between (Django: "ready to be executed again"), not finished.
    result = tasks.flaky.enqueue("again")
    run_worker_until_finished(result)
    assert [(h.signal, h.result.status, h.result.attempts) for h in heard] == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("started", TaskResultStatus.RUNNING, 2),
        ("finished", TaskResultStatus.SUCCESSFUL, 2),
    ]
    read = heard[-1].read
    assert read is not None and read.status == TaskResultStatus.SUCCESSFUL
    assert read.return_value == {
        "label": "again",
        "attempt": 2,
        "id": result.id,
        "status": "RUNNING",
    }
    assert [e.exception_class for e in read.errors] == [ValueError]


@pytest.mark.slow
def test_the_last_failed_attempt_sends_task_finished_with_every_error(
    scheduler_default: None, transactional_db: None, heard: list[Heard]
) -> None:
    result = tasks.explode.enqueue("boom")
    run_worker_until_finished(result)
    assert [(h.signal, h.result.status, h.result.attempts) for h in heard] == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("started", TaskResultStatus.RUNNING, 2),
        ("finished", TaskResultStatus.FAILED, 2),
    ]
    (done,) = finished(heard)
    assert done.read is not None and done.read.status == TaskResultStatus.FAILED
    # Each attempt's error, as Django's backends write it: read in the receiver as sent.
    for errors in (done.result.errors, done.read.errors):
        assert [e.exception_class for e in errors] == [tasks.TaskBoom] * 2
        assert "tasks.TaskBoom: boom" in errors[-1].traceback
        assert "raise TaskBoom(message)" in errors[-1].traceback
    assert done.result.finished_at is not None
    assert Job.objects.get(id=result.id).in_dlq


def test_a_task_finished_receiver_that_raises_is_logged_and_changes_nothing(
    scheduler_default: None,
    transactional_db: None,
    heard: list[Heard],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The task ran and its success is recorded: a receiver's error is logged, the other
    # receivers still hear the signal, and the job stays completed.
    def broken(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        raise RuntimeError("the metrics server is down")

    task_finished.connect(broken, dispatch_uid="broken-receiver")
    try:
        result = tasks.add.enqueue(1, 2)
        with caplog.at_level(logging.ERROR, logger="jobs.tasks_backend"):
            run_worker()
    finally:
        task_finished.disconnect(dispatch_uid="broken-receiver")
    (logged,) = [r for r in caplog.records if r.name == "jobs.tasks_backend"]
    assert "task_finished receiver" in logged.getMessage() and result.id in logged.getMessage()
    assert logged.exc_info and "the metrics server is down" in str(logged.exc_info[1])
    assert [h.signal for h in heard] == ["started", "finished"]
    job = Job.objects.get(id=result.id)
    assert (job.status, job.result, job.attempt_count) == (JobStatus.COMPLETED, 3, 1)
    assert tasks.add.get_result(result.id).status == TaskResultStatus.SUCCESSFUL


def test_a_receiver_that_takes_its_time_holds_up_no_job(
    scheduler_default: None, transactional_db: None, heard: list[Heard]
) -> None:
    # Receivers run on a thread of their own: the worker records every outcome and ends
    # while the first receiver is still busy (a metrics server slow to answer).
    answer = threading.Event()

    def slow(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        answer.wait(30)

    task_finished.connect(slow, dispatch_uid="slow-receiver")
    try:
        results = [tasks.add.enqueue(n, 1) for n in range(3)]
        assert WorkerLoop(once=True).run() == 0
        assert [job_status(r.id) for r in results] == [JobStatus.COMPLETED] * 3
        # At most the first signal, heard by the receiver connected before the slow one.
        assert len(finished(heard)) <= 1
        answer.set()
        assert tasks_backend.finished_signals.flush(10)
    finally:
        answer.set()
        task_finished.disconnect(dispatch_uid="slow-receiver")
    assert sorted((h.result.id, h.read and h.read.return_value) for h in finished(heard)) == sorted(
        (r.id, n + 1) for n, r in enumerate(results)
    )


@pytest.mark.slow
def test_a_task_cancelled_while_it_runs_sends_no_task_finished(
    scheduler_default: None, transactional_db: None, heard: list[Heard]
) -> None:
    # The worker lets the attempt go and does not record what the task returns later.
    result = nap.enqueue(2.0)
    worker = WorkerLoop(once=True)

    def operator() -> None:
        try:
            wait_for(lambda: [h.signal for h in heard] == ["started"], timeout=60)
            state.cancel(uuid.UUID(result.id))
        finally:
            connection.close()  # this thread's own

    thread = threading.Thread(target=operator)
    thread.start()
    run_worker(worker)
    thread.join()
    time.sleep(2.0)  # the task returns after its two seconds: still nothing to hear
    assert tasks_backend.finished_signals.flush(10)
    assert [h.signal for h in heard] == ["started"]
    assert nap.get_result(result.id).status == TaskResultStatus.FAILED


@pytest.mark.slow
def test_a_task_over_its_timeout_on_its_last_attempt_is_finished_failed(
    one_attempt: None, transactional_db: None, heard: list[Heard], settings: Any
) -> None:
    # Its worker gave the last attempt up: the task failed, as Django's result says, and
    # receivers hear it as they hear any other failure.
    settings.SCHEDULER_HANDLER_TIMEOUT = 0.3
    result = nap.enqueue(1.0)
    run_worker()
    assert tasks_backend.finished_signals.flush(10)
    assert [(h.signal, h.result.status) for h in heard] == [
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.FAILED),
    ]
    read = nap.get_result(result.id)
    assert read.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in read.errors] == ["worker.outcome.HandlerTimeout"]


# A worker process whose task_finished receiver is slow: when its loop ends, the signals of
# the tasks it recorded last are still to be sent.
SLOW_RECEIVER_WORKER = """
import sys, time, django
django.setup()
from django_tasks.signals import task_finished
from worker.worker import Worker

def slow(sender, task_result, **kwargs):
    time.sleep(0.3)
    with open(sys.argv[1], "a") as heard:
        heard.write(f"{task_result.id} {task_result.status} {task_result.return_value}\\n")

task_finished.connect(slow)
sys.exit(Worker(once=True, concurrency=4).run())
"""


@pytest.mark.slow
def test_a_worker_that_stops_sends_the_task_finished_signals_still_due(
    scheduler_default: None, transactional_db: None, tmp_path: Path
) -> None:
    results = [tasks.add.enqueue(n, n) for n in range(4)]
    heard = tmp_path / "heard.txt"
    env = {**subprocess_environment(), "SCHEDULER_SHUTDOWN_GRACE": "10"}
    done = subprocess.run(
        [sys.executable, "-c", SLOW_RECEIVER_WORKER, str(heard)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(heard.read_text().splitlines()) == sorted(
        f"{r.id} SUCCESSFUL {n + n}" for n, r in enumerate(results)
    )


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
