"""Django tasks used by the tests (tests/integration/test_django_tasks.py). A worker
subprocess imports this module when it first meets one of their jobs."""

from __future__ import annotations

import time
from typing import Any

from django_tasks import TaskContext, task
from django_tasks.base import Task


class TaskBoom(Exception):
    """Raised by `explode`, so that its class path is not a builtin's."""


@task
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@task(takes_context=True)
def flaky(context: TaskContext, label: str) -> dict[str, Any]:
    """Fail the first attempt; then return what the context says."""
    if context.attempt == 1:
        raise ValueError(f"{label}: the first attempt fails")
    result = context.task_result
    return {"label": label, "attempt": context.attempt, "id": result.id, "status": result.status}


@task
def explode(message: str) -> None:
    raise TaskBoom(message)


@task
async def double(number: int) -> int:
    return number * 2


@task
def stamp(label: str) -> tuple[str, float]:
    """Return the label and when it ran (a tuple comes back as a list, as with Django's
    backends). Jobs claimed together share their start time; this says which ran first."""
    return label, time.time()


TASKS: list[Task[Any, Any]] = [add, flaky, explode, double, stamp]
