"""The errors of a task whose attempts raised nothing a traceback names (its handler ran
over its timeout, its worker was lost, it was cancelled while running), or raised an
exception group (whose traceback Python prints in a frame of its own): each names a class a
caller can import and compare, as Django's `TaskError.exception_class` does."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils.module_loading import import_string
from django_tasks import TaskResultStatus, task_backends

from jobs import state
from jobs.registry import JobCancelled, registry
from jobs.tasks_backend import RECORDED_WITHOUT_TRACE, WorkerLost
from tests.attempts import fail_attempt
from tests.handlers_app import tasks
from worker.outcome import HandlerTimeout, record_of

from .test_state import new_worker

pytestmark = pytest.mark.django_db(transaction=True)

SETTING = {"default": {"BACKEND": "jobs.tasks_backend.SchedulerBackend"}}


@pytest.fixture
def declared() -> Iterator[None]:
    with override_settings(TASKS=SETTING):
        task_backends["default"].validate_task(tasks.explode)
        yield
        registry.unregister(tasks.explode.module_path)


def failed_once(error_type: str, message: str) -> Any:
    """A task run once, whose attempt the worker recorded as `error_type` with no trace."""
    result = tasks.explode.using(priority=0).enqueue("never raised")
    (claimed,) = state.claim(new_worker().id, 1, [uuid.UUID(result.id)])
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type=error_type,
        error_message=message,
        stack_trace=None,
        retry_delay=timedelta(minutes=5),
    )
    return task_backends["default"].get_result(result.id)


@pytest.mark.parametrize(
    ("recorded", "raised_as"),
    [("HandlerTimeout", HandlerTimeout), ("WorkerLost", WorkerLost), ("Cancelled", JobCancelled)],
)
def test_an_attempt_that_raised_nothing_names_a_class_one_can_import(
    declared: None, recorded: str, raised_as: type[BaseException]
) -> None:
    result = failed_once(recorded, "handler ran over its 5 s")
    assert result.status in (TaskResultStatus.READY, TaskResultStatus.FAILED)
    (error,) = result.errors
    # Before: the bare name "HandlerTimeout", which Django's `exception_class` cannot import.
    assert error.exception_class is raised_as
    # No frames to show: what happened, in the words recorded.
    assert error.traceback == "handler ran over its 5 s"


def test_every_name_recorded_without_a_trace_is_a_class_of_the_project() -> None:
    # The table cannot point at a class that moved, nor miss the name the worker writes.
    for recorded, path in RECORDED_WITHOUT_TRACE.items():
        found = import_string(path)
        assert issubclass(found, BaseException)
        if found.__module__.startswith("worker."):
            assert record_of(found("what happened")).error_type == recorded


async def _task_group() -> None:
    async def fails() -> None:
        raise ValueError("one of the group")

    async with asyncio.TaskGroup() as group:
        group.create_task(fails())


def test_an_exception_group_names_its_class(declared: None) -> None:
    # An async task running a TaskGroup, or code using `except*`, fails with an exception
    # group, whose lines Python prints inside a margin ("  | ExceptionGroup: ..."). Before:
    # the bare "ExceptionGroup", which `exception_class` cannot import.
    with pytest.raises(ExceptionGroup) as raised:
        asyncio.run(_task_group())
    written = record_of(raised.value)
    result = tasks.explode.enqueue("grouped")
    (claimed,) = state.claim(new_worker().id, 1, [uuid.UUID(result.id)])
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type=written.error_type,
        error_message=written.error_message,
        stack_trace=written.stack_trace,
        retry_delay=timedelta(minutes=5),
    )
    (error,) = task_backends["default"].get_result(result.id).errors
    assert error.exception_class is ExceptionGroup
    assert "ValueError: one of the group" in error.traceback
