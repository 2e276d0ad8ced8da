"""`manage.py check` on the tasks backend's settings, as a Django team writes them in TASKS:
one that makes every `task.enqueue()` fail, or every task of a queue unusable, is named by
the check, not found by the first request that enqueues."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

BACKEND = "jobs.tasks_backend.SchedulerBackend"


def check_with(tasks: dict[str, Any]) -> None:
    with override_settings(TASKS=tasks):
        call_command("check", verbosity=0)


@pytest.mark.parametrize("attempts", [0, 11, "5", 2.5])
def test_a_max_retries_no_job_can_have_is_named_by_check(attempts: object) -> None:
    with pytest.raises(SystemCheckError, match=r"TASKS\['default'\]\['OPTIONS'\]\['MAX_RETRIES'\]"):
        check_with({"default": {"BACKEND": BACKEND, "OPTIONS": {"MAX_RETRIES": attempts}}})


def test_a_queue_name_no_queue_can_have_is_named_by_check() -> None:
    with pytest.raises(SystemCheckError, match=r"TASKS\['default'\]\['QUEUES'\].*'bad name'"):
        check_with({"default": {"BACKEND": BACKEND, "QUEUES": ["default", "bad name"]}})


def test_queues_written_as_one_string_is_named_by_check() -> None:
    # set("default") is its letters: every task would be refused "Queue 'default' is not
    # valid for backend", with no word of why.
    with pytest.raises(SystemCheckError, match=r"TASKS\['default'\]\['QUEUES'\].*a list"):
        check_with({"default": {"BACKEND": BACKEND, "QUEUES": "default"}})


def test_settings_that_work_pass_the_check() -> None:
    check_with(
        {
            "default": {"BACKEND": BACKEND},
            "emails": {
                "BACKEND": BACKEND,
                "QUEUES": ["default", "emails"],
                "OPTIONS": {"MAX_RETRIES": 10},
            },
            "anything": {"BACKEND": BACKEND, "QUEUES": []},
        }
    )
