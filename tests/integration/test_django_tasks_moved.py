"""A task declared on another backend and enqueued on the scheduler's alias
(`task.using(backend="scheduler")`, how a team moves tasks over one at a time) runs in a
worker that has never seen it: a fresh `runworker` process, where the `@task` decorator
declares the task on its own backend only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import override_settings
from django_tasks import TaskResultStatus, task_backends

from jobs.models import Worker
from jobs.registry import registry
from tests.handlers_app import moved_settings, tasks
from tests.integration.conftest import WorkerProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("django_tasks")]

MOVED_SETTINGS = {"DJANGO_SETTINGS_MODULE": moved_settings.__name__}
ADD = tasks.add.module_path


@pytest.fixture
def moved(transactional_db: None) -> Iterator[None]:
    with override_settings(TASKS=moved_settings.TASKS):
        yield
        # Enqueuing registered it in this process (the module is imported once per process).
        registry.unregister(ADD)


def test_a_task_moved_to_the_scheduler_runs_in_a_fresh_worker(
    moved: None, start_worker: Callable[..., WorkerProcess]
) -> None:
    # Before: the worker imported the task's module (`registry.load`), where `@task` judged
    # the task by "default", Django's ImmediateBackend, and registered nothing: the worker
    # listed the type as unhandled and the job waited forever.
    assert tasks.add.backend == "default"
    result = tasks.add.using(backend="scheduler").enqueue(2, 3)
    worker = start_worker("--concurrency", "1", env=MOVED_SETTINGS)

    def finished_or_unhandled() -> Any:
        read = task_backends["scheduler"].get_result(result.id)
        row = worker.row()
        return read.is_finished or (row is not None and ADD in row.unhandled_types)

    wait_for(finished_or_unhandled, timeout=60, interval=0.2, what="the task to finish")
    unhandled = Worker.objects.filter(unhandled_types__contains=[ADD])
    assert not unhandled.exists(), f"the worker has no handler for {ADD}:\n{worker.logs()}"
    read = task_backends["scheduler"].get_result(result.id)
    assert (read.status, read.return_value, read.backend) == (
        TaskResultStatus.SUCCESSFUL,
        5,
        "scheduler",
    )
