"""The README's recipes for a team's own test suite ("In your own code and tests"): each
works as written."""

from __future__ import annotations

import threading

import pytest
from django.core.management import call_command
from django.test import override_settings

from jobs import state
from jobs.models import Job
from tests.handlers_app.tasks import add
from worker.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("test_handlers")
def test_a_worker_once_in_process_runs_what_is_due_and_returns() -> None:
    job = state.enqueue("echo", {"value": 7})

    assert Worker(once=True).run() == 0

    done = Job.objects.get(id=job["id"])
    assert (done.status, done.result) == ("completed", 7)


@override_settings(
    TASKS={"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
)
def test_the_immediate_backend_runs_a_task_in_the_caller() -> None:
    result = add.enqueue(2, 3)

    assert result.return_value == 5
    assert not Job.objects.exists()


@pytest.mark.usefixtures("test_handlers")
def test_runworker_called_in_a_process_with_threads_of_its_own_returns() -> None:
    # A test runner's or an application's threads outlive the worker: the command ended the
    # whole process (`os._exit`) as if they were threads its handlers had left running.
    done = threading.Event()
    theirs = threading.Thread(target=done.wait, args=(60,))
    theirs.start()
    job = state.enqueue("echo", {"value": 8})

    call_command("runworker", once=True)

    assert Job.objects.get(id=job["id"]).status == "completed"
    done.set()
    theirs.join()
