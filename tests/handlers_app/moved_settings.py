"""The project's settings, for a worker subprocess of a project moving its tasks over one at
a time: `@task` declares them on "default", Django's own backend, and those moved are
enqueued with `task.using(backend="scheduler")` (tests/integration/test_django_tasks_moved.py)."""

from scheduler_project.settings import *  # noqa: F403

TASKS = {
    "default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"},
    "scheduler": {"BACKEND": "jobs.tasks_backend.SchedulerBackend"},
}
