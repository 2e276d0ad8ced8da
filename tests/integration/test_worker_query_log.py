"""A worker started with the defaults (DEBUG on) keeps no log of its statements from one
pass to the next: Django's query log is emptied only when a web request starts."""

from __future__ import annotations

import pytest

from jobs import state
from jobs.models import Job

from .conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_debug_workers_handler_thread_forgets_the_statements_of_its_earlier_jobs(start_worker):
    jobs = [state.enqueue("logged_queries", {}) for _ in range(12)]

    start_worker("--concurrency", "1", "--once", env={"DEBUG": "true"})

    done = wait_for(
        lambda: (
            [job.result for job in Job.objects.filter(status="completed").order_by("id")]
            if Job.objects.filter(status="completed").count() == len(jobs)
            else None
        ),
        what="every job to complete",
    )
    # One thread ran them all, one after the other: each saw its own statement alone, where
    # the log had grown by one statement a job (up to 9,000 per connection).
    assert done == [{"logged": 1}] * len(jobs)
