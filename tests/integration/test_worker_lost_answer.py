"""A claim that committed, whose answer the worker never had: its connection broke once the
statement was sent. The claimed jobs are the worker's alone, so it asks the database which
jobs it holds and runs them, instead of leaving them in `processing` for
SCHEDULER_STUCK_AFTER and then counting a lost attempt that never ran.

No proxy can cut a connection between a COMMIT and its answer on cue, so the claim runs for
real and only its answer is lost: the error is raised once the claim has committed.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import OperationalError

from jobs import state
from jobs.models import Job, JobAttempt
from jobs.queue_names import ALL_QUEUES, QueueSelection
from tests.handlers_app.handlers import counted_runs
from worker.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


# One job per claim: the first claim is an idle worker's own, the next ones usually go
# through the claimer's thread while a job runs.
@pytest.mark.parametrize("lost_claim", [1, 2])
def test_the_jobs_of_a_claim_whose_answer_was_lost_run_once_without_a_lost_attempt(
    monkeypatch, tmp_path, test_handlers, lost_claim
):
    effects = tmp_path / "effects"
    jobs = [state.enqueue("count_run", {"path": str(effects)}) for _ in range(3)]
    claim = state.claim
    claims: list[list[uuid.UUID]] = []

    def claim_whose_answer_is_lost(
        worker_id: uuid.UUID,
        limit: int,
        job_ids: list[uuid.UUID] | None = None,
        queues: QueueSelection = ALL_QUEUES,
    ) -> list[state.ClaimedJob]:
        claimed = claim(worker_id, limit, job_ids, queues)
        claims.append([job.id for job in claimed])
        if len(claims) == lost_claim:
            raise OperationalError("server closed the connection unexpectedly")
        return claimed

    monkeypatch.setattr(state, "claim", claim_whose_answer_is_lost)

    assert Worker(once=True, concurrency=1, prefetch=0).run() == 0

    # The lost claim had taken a job; each job ran once, in one attempt that succeeded.
    assert len(claims[lost_claim - 1]) == 1
    assert counted_runs(effects) == {job["id"]: 1 for job in jobs}
    ids = [job["id"] for job in jobs]
    assert set(Job.objects.filter(id__in=ids).values_list("status", flat=True)) == {"completed"}
    attempts = JobAttempt.objects.filter(job_id__in=ids)
    assert [a.status for a in attempts] == ["succeeded"] * 3
