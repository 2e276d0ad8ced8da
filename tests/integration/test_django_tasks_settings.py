"""Django tasks whose settings changed after they were enqueued (a queue left `QUEUES`, an
alias was renamed), or that were made as jobs through the API, where Django's checks do not
run: their results stay readable and their jobs run, and what could never run is refused
when it is enqueued.

The tasks run in a worker in this process (`Worker(once=True)`), as `runworker` runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from django_tasks import TaskResult, TaskResultStatus, task, task_backends
from django_tasks.exceptions import InvalidTaskError
from django_tasks.signals import task_finished

from jobs import tasks_backend
from jobs.models import Job
from jobs.registry import registry
from tests.handlers_app import tasks
from worker.worker import Worker as WorkerLoop

pytestmark = pytest.mark.xdist_group("django_tasks")

BACKEND = "jobs.tasks_backend.SchedulerBackend"
# One attempt: a task that cannot run is FAILED at once, not READY for a retry.
ONE_ATTEMPT = {"MAX_RETRIES": 1}
WITH_EMAILS = {
    "default": {"BACKEND": BACKEND, "QUEUES": ["default", "emails"], "OPTIONS": ONE_ATTEMPT}
}
WITHOUT_EMAILS = {"default": {"BACKEND": BACKEND, "QUEUES": ["default"], "OPTIONS": ONE_ATTEMPT}}
ADD = tasks.add.module_path


def mail(to: str) -> str:
    """Declared as a task with a queue of its own in `mail_task` (at import, the project's
    settings allow only `default`)."""
    return f"sent to {to}"


@pytest.fixture
def declared(db: None) -> Iterator[None]:
    with override_settings(TASKS=WITH_EMAILS):
        for declared_task in tasks.TASKS:
            task_backends["default"].validate_task(declared_task)
        yield
        for declared_task in tasks.TASKS:
            registry.unregister(declared_task.module_path)


@pytest.fixture
def finished_heard() -> Iterator[list[TaskResult[Any]]]:
    received: list[TaskResult[Any]] = []

    def on_finished(sender: type, task_result: TaskResult[Any], **_: Any) -> None:
        received.append(task_result)

    task_finished.connect(on_finished, dispatch_uid="settings-test")
    yield received
    task_finished.disconnect(dispatch_uid="settings-test")


def run_worker() -> None:
    assert WorkerLoop(once=True).run() == 0
    assert tasks_backend.finished_signals.flush(10)


def test_a_result_stays_readable_once_its_queue_left_queues(declared: None) -> None:
    # Before: `get_result()` and `refresh()` raised InvalidTaskError ("Queue 'emails' is not
    # valid for backend"): the task was rebuilt through `Task.using`, which judges it by the
    # settings of today. A result is a record of what was enqueued.
    result = tasks.add.using(queue_name="emails").enqueue(1, 2)
    with override_settings(TASKS=WITHOUT_EMAILS):
        read = tasks.add.get_result(result.id)
        assert (read.status, read.task.queue_name, read.args) == (
            TaskResultStatus.READY,
            "emails",
            [1, 2],
        )
        result.refresh()
        assert result.status == TaskResultStatus.READY
        # Enqueuing it again is judged by today's settings.
        with pytest.raises(InvalidTaskError, match="Queue 'emails' is not valid"):
            read.task.enqueue(1, 2)


def test_a_result_stays_readable_once_its_alias_is_gone(declared: None) -> None:
    # Before: InvalidTaskBackendError ("The connection 'default' doesn't exist"). The
    # backend reading it answers for it, so that `refresh()` works.
    result = tasks.add.enqueue(1, 2)
    with override_settings(TASKS={"renamed": WITH_EMAILS["default"]}):
        read = task_backends["renamed"].get_result(result.id)
        assert (read.backend, read.task.backend, read.args) == ("renamed", "renamed", [1, 2])
        read.refresh()
        assert read.status == TaskResultStatus.READY


def test_a_job_outside_the_backends_queues_runs(
    declared: None,
    transactional_db: None,
    operator_client: Any,
    finished_heard: list[TaskResult[Any]],
) -> None:
    # QUEUES judges what Django enqueues; a job the scheduler holds runs in its queue. Before,
    # each attempt failed with InvalidTaskError, and a retry from the DLQ failed again: no
    # edit moves a job to another queue.
    emailed = tasks.add.using(queue_name="emails").enqueue(2, 3)
    made = operator_client.post(
        "/api/v1/jobs",
        {"type": ADD, "payload": {"args": [4, 5]}, "priority": 2, "queue": "elsewhere"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    with override_settings(TASKS=WITHOUT_EMAILS):
        run_worker()
        for result_id, queue, value in [
            (emailed.id, "emails", 5),
            (made.json()["id"], "elsewhere", 9),
        ]:
            read = tasks.add.get_result(result_id)
            assert (read.status, read.return_value, read.errors) == (
                TaskResultStatus.SUCCESSFUL,
                value,
                [],
            )
            assert read.task.queue_name == queue
    assert sorted((r.id, r.return_value) for r in finished_heard) == sorted(
        [(emailed.id, 5), (made.json()["id"], 9)]
    )


def test_a_job_whose_alias_is_gone_runs_through_one_that_is_there(
    declared: None, transactional_db: None, finished_heard: list[TaskResult[Any]]
) -> None:
    # Before: each attempt failed with InvalidTaskBackendError, and its task_finished was
    # never sent (its result could not be read).
    result = tasks.add.enqueue(2, 3)
    with override_settings(TASKS={"renamed": WITH_EMAILS["default"]}):
        run_worker()
        read = task_backends["renamed"].get_result(result.id)
    assert (read.status, read.return_value, read.errors) == (TaskResultStatus.SUCCESSFUL, 5, [])
    (heard,) = finished_heard
    assert (heard.id, heard.backend, heard.return_value) == (result.id, "renamed", 5)


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        ({"backend": "nowhere"}, "payload.backend", "'nowhere' is not a TASKS alias"),
        ({"run_after": "next tuesday"}, "payload.run_after", "ISO 8601"),
        ({"run_after": "2030-01-01T10:00:00"}, "payload.run_after", "offset"),
    ],
)
def test_a_task_job_that_could_never_run_is_refused_by_the_api(
    declared: None, operator_client: Any, payload: dict[str, Any], field: str, words: str
) -> None:
    # Before: accepted, then every attempt failed (and `get_result()` raised) on a backend
    # alias no TASKS setting names or a run_after no datetime reads.
    jobs = Job.objects.count()
    answer = operator_client.post(
        "/api/v1/jobs",
        {"type": ADD, "payload": {"args": [1, 2], **payload}, "priority": 2},
        format="json",
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert words in " ".join(error["details"][field])
    assert Job.objects.count() == jobs


@pytest.fixture
def mail_task(db: None) -> Iterator[Any]:
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["emails"]}}):
        declared_task = task(queue_name="emails")(mail)
        yield declared_task
        registry.unregister(declared_task.module_path)


def test_a_task_job_made_without_a_queue_waits_in_the_tasks_queue(
    mail_task: Any, operator_client: Any
) -> None:
    # As `enqueue()` sends it. Before: `default`, a queue its backend does not allow.
    made = operator_client.post(
        "/api/v1/jobs",
        {"type": mail_task.module_path, "payload": {"args": ["ann"]}, "priority": 2},
        format="json",
    )
    assert made.status_code == 201, made.json()
    assert made.json()["queue"] == "emails"
    assert mail_task.enqueue("bob").task.queue_name == "emails"


@pytest.mark.parametrize(("priority", "kept"), [(True, 1), (5.0, 5)])
def test_a_priority_django_takes_is_kept_as_the_whole_number_it_is(
    declared: None, priority: Any, kept: int
) -> None:
    # Django takes any value equal to a whole number. Before: True was refused as
    # "payload.priority: True is not of type 'integer'", and 5.0 came back as 5.0.
    result = tasks.add.using(priority=priority).enqueue(1, 2)
    read = tasks.add.get_result(result.id)
    assert (type(read.task.priority), read.task.priority) == (int, kept)
