"""What a handler prints (stdout, stderr) is its attempt's log, as what it logs is: the job's
page shows it, and the worker's own log names the job it came from."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs import state
from jobs.models import JobLog

from .conftest import job_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PRINTED = [
    ("INFO", "first printed line"),
    ("INFO", "second printed line"),
    ("WARNING", "written to stderr"),
    ("INFO", "no newline at the end"),
]


@pytest.mark.parametrize("job_type", ["prints", "prints_inline"])
def test_what_a_handler_prints_is_its_attempts_log_and_named_in_the_workers(start_worker, job_type):
    job = state.enqueue(job_type, {})
    worker = start_worker()
    worker.wait_registered()
    wait_for(lambda: job_status(job["id"]) == "completed", timeout=20, what="the job to complete")

    logged = JobLog.objects.filter(job_id=job["id"], attempt__job_id=job["id"])
    assert list(logged.values_list("level", "message")) == PRINTED

    def printed_lines() -> list[dict[str, Any]]:
        entries = [json.loads(x) for x in worker.logs().splitlines() if x.startswith("{")]
        return [e for e in entries if e.get("job_id") == job["id"] and "stream" in e]

    lines = wait_for(lambda: len(printed_lines()) == 4 and printed_lines(), what="printed lines")
    assert [(e["level"], e["message"], e["stream"]) for e in lines] == [
        ("INFO", "first printed line", "stdout"),
        ("INFO", "second printed line", "stdout"),
        ("WARNING", "written to stderr", "stderr"),
        ("INFO", "no newline at the end", "stdout"),
    ]
    assert {e["job_type"] for e in lines} == {job_type}
    # The thread the handler started is not running it: its line passes through as printed.
    own = f"a thread of its own, for {job['id']}"
    assert own in worker.logs().splitlines()
