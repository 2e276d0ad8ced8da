"""`make benchmark-profile`'s server part on the test database: a backlog claimed and
completed as a worker does, each statement explained, with the triggers PostgreSQL ran for
it (no timing is asserted)."""

from __future__ import annotations

import uuid

import pytest

from benchmarks.profile import drain_explained
from jobs import state
from jobs.models import Job, JobAttempt, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_explained_drain_claims_and_completes_each_job_and_names_its_triggers() -> None:
    ids = [state.enqueue("noop", {}, priority=2)["id"] for _ in range(3)]
    ids = [uuid.UUID(str(job_id)) for job_id in ids]

    claim, completion = drain_explained(ids, uuid.uuid4())

    assert [label for label, _ in claim] == [
        "the statement's execution",
        "its UPDATE of jobs",
        "trigger jobs_count_updates",
        "trigger foreign-key check (job_attempts)",
        "trigger job_attempts_count_inserts",
    ]
    assert [label for label, _ in completion][:3] == [
        "the statement's execution",
        "its UPDATE of jobs",
        "trigger jobs_count_updates",
    ]
    assert all(us > 0 for _, us in claim[:2] + completion[:2])
    # Committed as a worker's claim and completion are: each job ran once, and is done.
    assert set(Job.objects.filter(id__in=ids).values_list("status", flat=True)) == {
        JobStatus.COMPLETED
    }
    assert JobAttempt.objects.filter(job_id__in=ids, status="succeeded").count() == 3
