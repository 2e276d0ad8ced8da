"""Django tasks (`@task`, django-tasks) run as jobs through `jobs.tasks_backend`.

One real `runworker` serves the whole module: every task below is enqueued first, the
worker runs them all, and each test then checks what a user sees of one of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connections, transaction
from django.test import override_settings
from django.utils import timezone
from django_tasks import TaskResult, TaskResultStatus, task, task_backends
from django_tasks.backends.immediate import ImmediateBackend
from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist

from jobs import state
from jobs.models import Job, JobStatus, Worker
from jobs.registry import registry
from jobs.tasks_backend import SchedulerBackend
from tests.conftest import subprocess_environment
from tests.handlers_app import tasks
from tests.integration.conftest import FAST_WORKER_ENV, WorkerProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("django_tasks")]

BACKEND = "jobs.tasks_backend.SchedulerBackend"
# Two attempts, so a task that keeps failing reaches the DLQ after one ~1 s backoff.
TASKS_SETTING = {
    "default": {
        "BACKEND": BACKEND,
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"MAX_RETRIES": 2},
    }
}


def run_async(call: Callable[[], Awaitable[Any]]) -> Any:
    """Run an async call the way an async view would, closing the connections it opened
    in Django's thread for synchronous work (they would outlive the test database)."""

    async def run() -> Any:
        try:
            return await call()
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(run())


def _declare_tasks() -> None:
    # The module was imported once per process; its task types may have been unregistered.
    for declared in tasks.TASKS:
        task_backends[declared.backend].validate_task(declared)


@pytest.fixture(scope="module")
def ran(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, TaskResult[Any]]]:
    """Enqueue one of each case, run one worker until all of them are finished."""
    with django_db_blocker.unblock(), override_settings(TASKS=TASKS_SETTING):
        _declare_tasks()
        now = timezone.now()
        results: dict[str, TaskResult[Any]] = {
            # Enqueued first, least urgent: the worker (one slot) must still run it last.
            "low": tasks.stamp.using(priority=-10).enqueue("low"),
            "add": tasks.add.enqueue(2, 3),
            "flaky": tasks.flaky.enqueue("retried"),
            "explode": tasks.explode.enqueue("always"),
            "later": tasks.stamp.using(run_after=now + timedelta(seconds=3)).enqueue("later"),
            "async": run_async(lambda: tasks.double.aenqueue(21)),
            "high": tasks.stamp.using(priority=10).enqueue("high"),
        }
        with transaction.atomic():
            transaction.on_commit(
                lambda: results.__setitem__("on_commit", tasks.add.enqueue(20, 22))
            )
        log = tmp_path_factory.mktemp("tasks-worker") / "worker.log"
        worker = WorkerProcess(
            ["--concurrency", "1"], {**subprocess_environment(), **FAST_WORKER_ENV}, log
        )
        try:
            wait_for(
                lambda: all(result_of(r).is_finished for r in results.values()),
                timeout=60,
                interval=0.2,
                what=f"every task to finish; worker log:\n{worker.logs()}",
            )
            yield results
        finally:
            worker.stop()
            for declared in tasks.TASKS:
                registry.unregister(declared.module_path)
            call_command("flush", verbosity=0, interactive=False)


def result_of(result: TaskResult[Any]) -> TaskResult[Any]:
    return task_backends["default"].get_result(result.id)


def job_of(result: TaskResult[Any]) -> Job:
    return Job.objects.get(id=result.id)


def test_a_task_is_a_job_of_its_module_path_and_its_result_comes_back(
    ran: dict[str, TaskResult[Any]], db: None
) -> None:
    result = result_of(ran["add"])
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert (result.args, result.kwargs) == ([2, 3], {})
    assert result.attempts == 1 and result.errors == []
    assert result.enqueued_at and result.started_at and result.finished_at
    assert result.enqueued_at <= result.started_at <= result.finished_at
    job = job_of(ran["add"])
    assert (job.type, job.status, job.result) == ("tests.handlers_app.tasks.add", "completed", 5)
    assert result.worker_ids == [str(Worker.objects.get().id)]
    # A tuple comes back as a list, as Django's own backends return it.
    assert result_of(ran["high"]).return_value[0] == "high"


def test_a_failed_attempt_is_retried_and_the_context_names_the_attempt(
    ran: dict[str, TaskResult[Any]], db: None
) -> None:
    result = result_of(ran["flaky"])
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {
        "label": "retried",
        "attempt": 2,
        "id": result.id,
        "status": "RUNNING",
    }
    assert result.attempts == 2
    (error,) = result.errors
    assert error.exception_class is ValueError
    assert error.exception_class_path == "builtins.ValueError"
    assert "ValueError: retried: the first attempt fails" in error.traceback


def test_a_task_that_keeps_failing_is_a_dead_letter_everywhere(
    ran: dict[str, TaskResult[Any]], operator_client: Any, operator: Any, client: Any
) -> None:
    result = result_of(ran["explode"])
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2 and result.finished_at is not None
    assert [e.exception_class_path for e in result.errors] == [
        "tests.handlers_app.tasks.TaskBoom"
    ] * 2
    assert result.errors[0].exception_class is tasks.TaskBoom
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    job_id = result.id
    dlq = operator_client.get("/api/v1/jobs/dlq").json()
    assert [job["type"] for job in dlq["results"] if job["id"] == job_id] == [
        "tests.handlers_app.tasks.explode"
    ]
    operator.is_staff = operator.is_superuser = True
    operator.save()
    client.force_login(operator)
    assert job_id in client.get("/dlq").content.decode()
    assert job_id in client.get(f"/dlq/{job_id}").content.decode()
    assert job_id in client.get("/admin/jobs/deadletterjob/").content.decode()
    # An operator retries it like any dead letter: it is READY again.
    state.retry_from_dlq(job_of(ran["explode"]).id)
    assert result_of(ran["explode"]).status == TaskResultStatus.READY


def test_priority_and_run_after_become_the_jobs_priority_and_scheduled_time(
    ran: dict[str, TaskResult[Any]], db: None
) -> None:
    high, low, later = job_of(ran["high"]), job_of(ran["low"]), job_of(ran["later"])
    assert (high.priority, job_of(ran["add"]).priority, low.priority) == (1, 2, 3)
    assert result_of(ran["low"]).task.priority == -10
    # One handler slot: the urgent task ran before the one enqueued before it.
    assert result_of(ran["high"]).return_value[1] < result_of(ran["low"]).return_value[1]
    run_after = ran["later"].task.run_after
    assert later.scheduled_at == run_after
    assert later.started_at and run_after and later.started_at >= run_after
    assert result_of(ran["later"]).task.run_after == run_after


def test_async_enqueue_and_async_tasks(ran: dict[str, TaskResult[Any]], db: None) -> None:
    result = run_async(lambda: tasks.double.aget_result(ran["async"].id))
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


def test_an_enqueue_on_commit_runs(ran: dict[str, TaskResult[Any]], db: None) -> None:
    result = result_of(ran["on_commit"])
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


# --- without a worker --------------------------------------------------------------------


@pytest.fixture
def declared(db: None) -> Iterator[None]:
    with override_settings(TASKS=TASKS_SETTING):
        _declare_tasks()
        yield
        for declared_task in tasks.TASKS:
            registry.unregister(declared_task.module_path)


def test_arguments_must_be_json_with_djangos_error(declared: None) -> None:
    jobs = Job.objects.count()
    with pytest.raises(TypeError) as ours:
        tasks.add.enqueue(1, timezone.now())
    with pytest.raises(TypeError) as djangos:
        ImmediateBackend("immediate", {}).enqueue(tasks.add, (1, timezone.now()), {})
    assert str(ours.value) == str(djangos.value) == "Unsupported type: <class 'datetime.datetime'>"
    assert Job.objects.count() == jobs


@pytest.mark.parametrize(
    ("enqueue", "error", "message"),
    [
        (lambda: tasks.add.enqueue(float("nan"), 2), ValueError, "args[0] is nan"),
        (lambda: tasks.add.enqueue(1, b="a\x00b"), ValueError, "kwargs.b holds the NUL"),
        (
            lambda: tasks.add.using(
                run_after=timezone.now().replace(year=9999, month=12, day=31)
            ).enqueue(1, 2),
            InvalidTaskError,
            "run_after: Out of range: write a year from 1970 to 9998.",
        ),
    ],
)
def test_what_only_this_backend_refuses_is_said_in_djangos_terms(
    declared: None, enqueue: Callable[[], Any], error: type[Exception], message: str
) -> None:
    # JSON Python writes but PostgreSQL cannot store, a run_after past the scheduler's years:
    # refused as Django refuses a bad argument or a bad task setting, in the caller's names
    # (args, kwargs, run_after), not as the job fields they become.
    jobs = Job.objects.count()
    with pytest.raises(error) as refused:
        enqueue()
    assert type(refused.value) is error
    assert message in str(refused.value)
    assert "payload" not in str(refused.value) and "scheduled_at" not in str(refused.value)
    assert Job.objects.count() == jobs


def test_a_run_after_that_passes_while_it_is_enqueued_is_due_now(declared: None) -> None:
    # Past when enqueue checked it but not when the backend read the clock first: it was
    # refused as "Must be in the future" (2 tries in 40 in a probe). Each of these is due
    # within the time an enqueue takes.
    for _ in range(200):
        soon = timezone.now() + timedelta(microseconds=100)
        result = tasks.stamp.using(run_after=soon).enqueue("soon")
        assert Job.objects.get(id=result.id).scheduled_at >= soon


def test_a_job_enqueued_in_a_rolled_back_transaction_never_exists(declared: None) -> None:
    jobs = Job.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        created = tasks.add.enqueue(1, 2)
        assert Job.objects.filter(id=created.id, status=JobStatus.PENDING).exists()
        raise RuntimeError("roll back")
    assert Job.objects.count() == jobs
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(created.id)


def test_queue_name_is_the_jobs_queue_and_one_of_the_backends_queues(declared: None) -> None:
    result = tasks.add.using(queue_name="emails").enqueue(1, 2)
    assert Job.objects.get(id=result.id).queue == "emails"
    assert tasks.add.get_result(result.id).task.queue_name == "emails"
    plain = tasks.add.enqueue(1, 2)
    assert Job.objects.get(id=plain.id).queue == "default"
    assert tasks.add.get_result(plain.id).task.queue_name == "default"
    with pytest.raises(InvalidTaskError, match=r"Queue .nowhere. is not valid for backend\."):
        tasks.add.using(queue_name="nowhere").enqueue(1, 2)
    # With QUEUES empty any queue is allowed, as in Django, if it can name a queue here.
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, "QUEUES": []}}):
        assert Job.objects.get(id=tasks.add.using(queue_name="x").enqueue(1, 2).id).queue == "x"
        with pytest.raises(InvalidTaskError, match="A queue name is"):
            tasks.add.using(queue_name="no/slash").enqueue(1, 2)


def test_a_task_defined_in_a_script_or_the_shell_is_refused_when_enqueued(declared: None) -> None:
    # Its type would be `__main__.<name>`: no worker can import it, so before, its job was
    # accepted and waited forever, the worker logging only that it had no handler.
    def in_a_script(x: int) -> int:
        return x

    in_a_script.__module__ = "__main__"
    in_a_script.__qualname__ = in_a_script.__name__
    jobs_before = Job.objects.count()
    with pytest.raises(InvalidTaskError, match="defined in __main__"):
        task(in_a_script).enqueue(1)
    assert Job.objects.count() == jobs_before


def test_only_task_jobs_have_task_results(declared: None) -> None:
    backend = SchedulerBackend("default", {})
    other = state.enqueue("noop", {})
    for result_id in (other["id"], "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(result_id)
