"""The state machine against real PostgreSQL and Redis: guarded transitions under races
between separate connections, events only after commit, dependencies, recurrence, the DLQ.

Races run in threads; each thread gets its own Django connection (closed at its end), so
two transactions really contend for the same rows.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from jobs import queues, state
from jobs.models import Job, JobAttempt, JobLog, Worker
from jobs.sql import query
from tests.attempts import fail_attempt

pytestmark = pytest.mark.django_db(transaction=True)


def new_worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="race", pid=os.getpid(), started_at=now, heartbeat_at=now)


def job_id_of(job: dict[str, Any]) -> uuid.UUID:
    return uuid.UUID(job["id"])


class Outcome:
    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.finished_at = 0.0


def in_thread(func: Callable[[], Any]) -> tuple[threading.Thread, Outcome]:
    outcome = Outcome()

    def run() -> None:
        try:
            outcome.value = func()
        except BaseException as exc:  # handed to the test thread, which asserts on it
            outcome.error = exc
        finally:
            outcome.finished_at = time.monotonic()
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()


def claimed(worker: Worker, job: dict[str, Any]) -> state.ClaimedJob:
    (claim,) = state.claim(worker.id, 1, [job_id_of(job)])
    return claim


def success(claim: state.ClaimedJob, result: Any = None) -> state.Success:
    return state.Success(claim.id, claim.attempt_id, result, timezone.now())


# --- races -----------------------------------------------------------------------------------


def test_two_workers_racing_to_claim_the_same_jobs_never_share_one():
    workers = [new_worker(), new_worker()]
    jobs = [state.enqueue("noop", {}, priority=2) for _ in range(20)]
    job_ids = [job_id_of(job) for job in jobs]
    start = threading.Barrier(2)

    def claim_all(worker: Worker) -> Callable[[], list[state.ClaimedJob]]:
        def run() -> list[state.ClaimedJob]:
            start.wait()
            taken: list[state.ClaimedJob] = []
            for job_id in job_ids:
                taken += state.claim(worker.id, 1, [job_id])
            return taken

        return run

    (t1, first), (t2, second) = in_thread(claim_all(workers[0])), in_thread(claim_all(workers[1]))
    join(t1, t2)
    assert first.error is None and second.error is None
    ids_first = {c.id for c in first.value}
    ids_second = {c.id for c in second.value}
    assert not ids_first & ids_second
    assert ids_first | ids_second == set(job_ids)
    assert JobAttempt.objects.count() == 20
    assert set(Job.objects.values_list("status", flat=True)) == {"processing"}


def test_a_claim_held_open_makes_the_other_claim_skip_the_job_not_wait():
    holder, rival = new_worker(), new_worker()
    job = state.enqueue("noop", {}, priority=2)
    held = threading.Event()
    release = threading.Event()

    def hold() -> list[state.ClaimedJob]:
        with transaction.atomic():
            taken = state.claim(holder.id, 1, [job_id_of(job)])
            held.set()
            release.wait(10)
        return taken

    t1, first = in_thread(hold)
    assert held.wait(10)
    t2, second = in_thread(lambda: state.claim(rival.id, 1, [job_id_of(job)]))
    join(t2)
    release.set()
    join(t1)
    assert second.value == []
    assert [c.id for c in first.value] == [job_id_of(job)]
    assert Job.objects.get(id=job["id"]).worker_id == holder.id


@pytest.mark.parametrize("first_to_commit", ["cancel", "complete"])
def test_cancel_racing_complete_exactly_one_wins(first_to_commit):
    worker = new_worker()
    job = state.enqueue("noop", {}, priority=2)
    claim = claimed(worker, job)
    holding = threading.Event()
    release = threading.Event()

    def cancel() -> Any:
        return state.cancel(claim.id)

    def complete() -> state.CompletionReport:
        return state.complete([success(claim, "done")], worker.id)

    first, second = (cancel, complete) if first_to_commit == "cancel" else (complete, cancel)

    def first_in_open_transaction() -> Any:
        with transaction.atomic():
            value = first()
            holding.set()
            release.wait(10)
        return value

    t1, winner = in_thread(first_in_open_transaction)
    assert holding.wait(10)
    t2, loser = in_thread(second)
    time.sleep(0.3)
    assert t2.is_alive(), "the second transition must wait for the first one's row lock"
    release.set()
    join(t1, t2)
    assert winner.error is None
    row = Job.objects.get(id=job["id"])
    attempt = JobAttempt.objects.get(id=claim.attempt_id)
    if first_to_commit == "cancel":
        assert loser.value.completed == []
        assert row.status == "cancelled" and row.result is None
        assert (attempt.status, attempt.error_type) == ("failed", "Cancelled")
    else:
        assert isinstance(loser.error, state.InvalidStateError)
        assert loser.error.status == "completed"
        assert row.status == "completed" and row.result == "done"
        assert attempt.status == "succeeded"


def test_complete_racing_rescue_exactly_one_wins_either_way():
    worker = new_worker()
    stale = timezone.now() - timedelta(hours=1)
    jobs = [state.enqueue("noop", {}, priority=2) for _ in range(2)]
    rescued_claim, completed_claim = (claimed(worker, job) for job in jobs)
    Worker.objects.filter(id=worker.id).update(heartbeat_at=stale)

    # The rescue goes first for one job: the worker's late success is refused.
    rescued = state.rescue_lost(stuck_after=timedelta(hours=2), worker_timeout=timedelta(minutes=1))
    assert {job["id"] for job in rescued} == {str(c.id) for c in (rescued_claim, completed_claim)}
    report = state.complete([success(rescued_claim)], worker.id)
    assert report.completed == []
    assert Job.objects.get(id=rescued_claim.id).status == "pending"
    assert JobAttempt.objects.get(id=rescued_claim.attempt_id).error_type == "WorkerLost"

    # A completion holding the row makes a concurrent rescue skip it, and the success stands.
    second_worker = new_worker()
    job = state.enqueue("noop", {}, priority=2)
    claim = claimed(second_worker, job)
    Worker.objects.filter(id=second_worker.id).update(heartbeat_at=stale)
    holding = threading.Event()
    release = threading.Event()

    def complete_in_open_transaction() -> state.CompletionReport:
        with transaction.atomic():
            report = state.complete([success(claim, 42)], second_worker.id)
            holding.set()
            release.wait(10)
        return report

    t1, completion = in_thread(complete_in_open_transaction)
    assert holding.wait(10)
    t2, rescue = in_thread(
        lambda: state.rescue_lost(stuck_after=timedelta(hours=2), worker_timeout=timedelta(0))
    )
    join(t2)
    release.set()
    join(t1)
    assert str(claim.id) not in {job["id"] for job in rescue.value}
    assert [j["id"] for j in completion.value.completed] == [str(claim.id)]
    assert Job.objects.get(id=claim.id).status == "completed"


def test_a_lost_attempt_reported_beside_the_live_one_is_refused_and_keeps_its_history():
    """A worker cut off from the database: its job is rescued, and once back it claims the
    job again, then reports the lost attempt's outcome and the new one's in one batch."""
    worker = new_worker()
    job = state.enqueue("noop", {}, priority=2)
    lost = claimed(worker, job)
    state.release(worker.id, "Cut off.")
    live = claimed(worker, job)

    late = success(lost, "late")
    report = state.complete([late, success(live, "live")], worker.id)

    assert [j["id"] for j in report.completed] == [str(job["id"])]
    assert report.refused == [late]
    assert Job.objects.get(id=live.id).result == "live"
    # The lost attempt stays what its release recorded; only the live one succeeded.
    history = {a.id: (a.status, a.error_type) for a in JobAttempt.objects.filter(job_id=live.id)}
    assert history == {
        lost.attempt_id: ("failed", "WorkerLost"),
        live.attempt_id: ("succeeded", None),
    }


def test_failures_reported_together_each_keep_their_own_error_and_fate(events):
    """A worker reports a turn's failures in one batch: one job waits for its retry, one
    enters the DLQ, and one whose attempt was cancelled meanwhile is refused."""
    worker = new_worker()
    retrying = claimed(worker, state.enqueue("noop", {"n": 1}, max_retries=3))
    dying = claimed(worker, state.enqueue("noop", {"n": 2}, max_retries=1))
    cancelled = claimed(worker, state.enqueue("noop", {"n": 3}, max_retries=3))
    state.cancel(cancelled.id)
    finished_at = timezone.now()

    def failure(claim: state.ClaimedJob, error: str, delay: timedelta) -> state.Failure:
        return state.Failure(
            claim.id, claim.attempt_id, "ValueError", error, f"trace of {error}", delay, finished_at
        )

    late = failure(cancelled, "too late", timedelta(0))
    report = state.fail(
        [
            failure(retrying, "bad input 1", timedelta(minutes=5)),
            late,
            failure(dying, "bad input 2", timedelta(minutes=7)),
        ]
    )

    assert report.refused == [late]
    fates = {job["id"]: (job["status"], job["in_dlq"], job["last_error"]) for job in report.failed}
    assert fates == {
        str(retrying.id): ("failed", False, "bad input 1"),
        str(dying.id): ("failed", True, "bad input 2"),
    }
    assert Job.objects.get(id=retrying.id).next_retry_at == finished_at + timedelta(minutes=5)
    attempts = {
        a.id: (a.status, a.error_message, a.stack_trace, a.finished_at)
        for a in JobAttempt.objects.filter(job_id__in=[retrying.id, dying.id, cancelled.id])
    }
    assert attempts[retrying.attempt_id] == (
        "failed", "bad input 1", "trace of bad input 1", finished_at,
    )  # fmt: skip
    assert attempts[dying.attempt_id] == (
        "failed", "bad input 2", "trace of bad input 2", finished_at,
    )  # fmt: skip
    assert attempts[cancelled.attempt_id][1] == "Cancelled while running"
    events.wait_for("job.retry_scheduled", lambda data: data["id"] == str(retrying.id))
    events.wait_for("job.dlq_entry", lambda data: data["id"] == str(dying.id))
    for job_id in (retrying.id, dying.id):
        events.wait_for("job.failed", lambda data, job_id=job_id: data["id"] == str(job_id))


def test_a_claim_handed_back_unstarted_leaves_the_job_as_it_was_before_it(events):
    worker = new_worker()
    job = state.enqueue("noop", {}, max_retries=3)
    first = claimed(worker, job)
    fail_attempt(
        first.id,
        first.attempt_id,
        error_type="ValueError",
        error_message="bad",
        stack_trace=None,
        retry_delay=timedelta(0),
    )
    before = Job.objects.get(id=first.id)
    second = claimed(worker, job)

    report = state.hand_back([(second.id, second.attempt_id)])

    (returned,) = report.returned
    assert returned["id"] == second.id and report.refused == []
    after = Job.objects.get(id=second.id)
    assert (after.status, after.attempt_count, after.worker_id) == ("pending", 1, None)
    assert (after.started_at, after.last_error) == (before.started_at, "bad")
    assert list(JobAttempt.objects.filter(job_id=second.id).values_list("id", flat=True)) == [
        first.attempt_id
    ]
    event = events.wait_for(
        "job.retry_scheduled", lambda data: data["id"] == job["id"] and data["status"] == "pending"
    )
    assert event["data"]["attempt_count"] == 1
    # Its claim is gone: handed back twice, the second is refused; claimed again, it is the
    # job's second attempt.
    assert state.hand_back([(second.id, second.attempt_id)]).refused == [
        (second.id, second.attempt_id)
    ]
    assert claimed(worker, job).attempt_number == 2


def test_a_claim_handed_back_unstarted_gives_back_its_start_under_a_rate_limit():
    """A rate limit counts the jobs that start: one handed back never started, so its start
    is not counted against the other workers (who would otherwise wait out the period).
    Under two limits, each gets it back."""
    queues.set_limit("type", "noop", max_starts=2, period_seconds=3600)
    queues.set_limit("queue", "batch", max_starts=5, period_seconds=3600)
    worker = new_worker()
    jobs = [state.enqueue("noop", {"n": n}, queue="batch") for n in range(3)]
    first = claimed(worker, jobs[0])
    assert queues.limit_usage("type", "noop")["recent_starts"] == 1
    assert queues.limit_usage("queue", "batch")["recent_starts"] == 1

    state.hand_back([(first.id, first.attempt_id)])

    assert queues.limit_usage("type", "noop")["recent_starts"] == 0
    assert queues.limit_usage("queue", "batch")["recent_starts"] == 0
    taken = state.claim(worker.id, 3, [job_id_of(job) for job in jobs])
    assert len(taken) == 2
    assert queues.limit_usage("type", "noop")["recent_starts"] == 2
    assert queues.limit_usage("queue", "batch")["recent_starts"] == 2


def test_the_previous_releases_statements_still_close_attempts():
    """During a rolling deploy the previous release's processes run against this schema
    (the release phase migrates first): their statements close attempts with one error for
    the whole batch, as text, and a success with bare NULLs."""
    worker = new_worker()
    failed, cancelled, succeeded = (
        claimed(worker, state.enqueue("noop", {"n": n})) for n in range(3)
    )
    now = timezone.now()
    calls = [
        (failed, "'failed', %s::text, %s::text, %s::text", ["Boom", "boom", "trace"]),
        (cancelled, "'failed', 'Cancelled', 'Cancelled while running', NULL", []),
        (succeeded, "'succeeded', NULL, NULL, NULL", []),
    ]
    with connection.cursor() as cursor:
        for claim, closing, params in calls:
            cursor.execute(
                "SELECT scheduler_close_attempts(%s::uuid[], %s::timestamptz[], " + closing + ")",
                [[claim.attempt_id], [now], *params],
            )
            assert cursor.fetchone() == (1,)
    closed = {
        a.id: (a.status, a.error_type, a.error_message, a.stack_trace, a.finished_at)
        for a in JobAttempt.objects.all()
    }
    assert closed == {
        failed.attempt_id: ("failed", "Boom", "boom", "trace", now),
        cancelled.attempt_id: ("failed", "Cancelled", "Cancelled while running", None, now),
        succeeded.attempt_id: ("succeeded", None, None, None, now),
    }


def test_two_cancels_racing_one_succeeds_the_other_is_refused():
    job = state.enqueue("noop", {}, priority=2)
    start = threading.Barrier(2)

    def cancel() -> Any:
        start.wait()
        return state.cancel(job_id_of(job))

    (t1, a), (t2, b) = in_thread(cancel), in_thread(cancel)
    join(t1, t2)
    outcomes = sorted([a, b], key=lambda o: o.error is not None)
    assert outcomes[0].value["status"] == "cancelled"
    assert isinstance(outcomes[1].error, state.InvalidStateError)
    assert outcomes[1].error.status == "cancelled"


# --- events and transactions -----------------------------------------------------------------


def test_event_is_published_only_after_the_callers_transaction_commits(events):
    with transaction.atomic():
        job = state.enqueue("noop", {}, priority=2)
        time.sleep(0.3)
        assert events.drain(0.2) == []
    event = events.wait_for("job.created", lambda data: data["id"] == job["id"])
    assert event["data"] == job


def test_the_hot_statements_are_prepared_after_a_few_runs():
    # Parsing and planning them cost as much as executing them (a claim of one job, more).
    worker = new_worker()
    for _ in range(6):
        job = state.enqueue("noop", {})
        (claim,) = state.claim(worker.id, 1, [job_id_of(job)])
        state.complete([state.Success(claim.id, claim.attempt_id, None, timezone.now())])
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = {row[0].splitlines()[0] for row in cursor.fetchall()}
    for name in ("create_job", "claim_jobs", "complete_jobs"):
        assert query(name).splitlines()[0] in prepared, name


def test_enqueue_in_a_rolled_back_transaction_leaves_no_job_and_no_event(events):
    with pytest.raises(RuntimeError), transaction.atomic():
        doomed = state.enqueue("noop", {}, priority=2)
        raise RuntimeError("the caller changed its mind")
    marker = state.enqueue("noop", {}, priority=2)
    events.wait_for("job.created", lambda data: data["id"] == marker["id"])
    events.drain(0.3)
    assert doomed["id"] not in {event["data"].get("id") for event in events.received}
    assert not Job.objects.filter(id=doomed["id"]).exists()
    assert Job.objects.filter(id=marker["id"]).exists()


def test_each_transition_publishes_its_events(events):
    worker = new_worker()
    job = state.enqueue("noop", {}, priority=2, max_retries=1)
    claim = claimed(worker, job)
    events.wait_for("job.started", lambda data: data["id"] == job["id"])
    fail_attempt(
        claim.id,
        claim.attempt_id,
        error_type="ValueError",
        error_message="bad",
        stack_trace=None,
        retry_delay=timedelta(seconds=1),
    )
    events.wait_for("job.failed", lambda data: data["id"] == job["id"])
    dlq = events.wait_for("job.dlq_entry", lambda data: data["id"] == job["id"])
    assert dlq["data"]["in_dlq"] is True
    state.retry_from_dlq(claim.id)
    retried = events.wait_for("job.retry_scheduled", lambda data: data["id"] == job["id"])
    assert retried["data"]["status"] == "pending"
    state.cancel(claim.id)
    events.wait_for("job.cancelled", lambda data: data["id"] == job["id"])
    stats = events.wait_for("stats.updated")
    assert set(stats["data"]) == {
        "pending", "processing", "completed", "failed", "dlq", "cancelled", "total",
    }  # fmt: skip


# --- dependencies, recurrence, DLQ -----------------------------------------------------------


def test_dependent_job_waits_for_its_upstream_to_complete():
    worker = new_worker()
    upstream = state.enqueue("noop", {}, priority=3)
    downstream = state.enqueue("noop", {}, priority=1, depends_on=job_id_of(upstream))
    assert downstream["depends_on"] == upstream["id"]
    taken = state.claim(worker.id, 10)
    assert [c.id for c in taken] == [job_id_of(upstream)]
    report = state.complete([success(taken[0])], worker.id)
    assert report.released == [job_id_of(downstream)]
    assert [c.id for c in state.claim(worker.id, 10)] == [job_id_of(downstream)]


def test_a_dependent_enqueued_while_its_upstream_completes_is_released():
    # The completion's UPDATE waits for the enqueue's lock on the upstream row; the edge
    # committed meanwhile is newer than the completion statement's snapshot, yet counted.
    worker = new_worker()
    upstream = state.enqueue("noop", {}, priority=2)
    claim = claimed(worker, upstream)
    edge_written, commit = threading.Event(), threading.Event()

    def enqueue_and_hold() -> dict[str, Any]:
        with transaction.atomic():
            downstream = state.enqueue("noop", {}, depends_on=job_id_of(upstream))
            edge_written.set()
            commit.wait(30)
        return downstream

    enqueuer, enqueued = in_thread(enqueue_and_hold)
    assert edge_written.wait(30)
    completer, completion = in_thread(lambda: state.complete([success(claim)], worker.id))
    with connection.cursor() as cursor:
        for _ in range(600):
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
            if cursor.fetchone()[0]:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the completion never waited for the enqueue's lock")
    commit.set()
    for thread in (enqueuer, completer):
        thread.join(30)
    assert enqueued.error is None and completion.error is None
    downstream = job_id_of(enqueued.value)
    assert completion.value.released == [downstream]
    assert [c.id for c in state.claim(worker.id, 10)] == [downstream]


def test_dependent_of_a_completed_job_is_runnable_at_once():
    worker = new_worker()
    upstream = state.enqueue("noop", {}, priority=2)
    state.complete([success(claimed(worker, upstream))], worker.id)
    downstream = state.enqueue("noop", {}, priority=2, depends_on=job_id_of(upstream))
    assert [c.id for c in state.claim(worker.id, 10)] == [job_id_of(downstream)]


def test_cancelling_an_upstream_job_cancels_its_dependents():
    upstream = state.enqueue("noop", {}, priority=2)
    middle = state.enqueue("noop", {}, priority=2, depends_on=job_id_of(upstream))
    last = state.enqueue("noop", {}, priority=2, depends_on=job_id_of(middle))
    state.cancel(job_id_of(upstream))
    for job in (middle, last):
        row = Job.objects.get(id=job["id"])
        assert row.status == "cancelled"
        assert "was cancelled" in row.last_error
    with pytest.raises(state.JobValidationError):
        state.enqueue("noop", {}, priority=2, depends_on=job_id_of(upstream))


def test_recurring_job_gets_its_next_slot_exactly_once():
    worker = new_worker()
    job = state.enqueue("noop", {}, priority=2, recur_interval="every_1_minute")
    claim = claimed(worker, job)
    report = state.complete([success(claim)], worker.id)
    (next_run,) = report.created
    assert next_run["recur_interval"] == "every_1_minute"
    assert next_run["status"] == "pending"
    scheduled = Job.objects.get(id=job["id"]).scheduled_at
    assert Job.objects.get(id=next_run["id"]).scheduled_at == scheduled + timedelta(minutes=1)
    # A duplicate report of the same success changes nothing and makes no second slot.
    again = state.complete([success(claim)], worker.id)
    assert (again.completed, again.created) == ([], [])
    assert Job.objects.filter(previous_run_id=job["id"]).count() == 1


def test_a_run_has_at_most_one_next_run_whatever_writes_it():
    """The database itself refuses a second next run of one run (a completion report that
    raced past the claim's fence would meet this), while any number of jobs are no next run."""
    first = state.enqueue("noop", {}, priority=2, recur_interval="every_1_minute")
    plain = [state.enqueue("noop", {}) for _ in range(3)]
    assert Job.objects.filter(previous_run__isnull=True).count() == 1 + len(plain)
    next_run = state.enqueue("noop", {}, priority=2, recur_interval="every_1_minute")
    Job.objects.filter(id=next_run["id"]).update(previous_run_id=first["id"])
    second = state.enqueue("noop", {}, priority=2, recur_interval="every_1_minute")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(id=second["id"]).update(previous_run_id=first["id"])


def test_dlq_retry_resets_attempts_and_keeps_history():
    worker = new_worker()
    job = state.enqueue("noop", {}, priority=2, max_retries=2)
    for attempt in range(2):
        Job.objects.filter(id=job["id"]).update(run_at=timezone.now() - timedelta(seconds=1))
        claim = claimed(worker, job)
        failed = fail_attempt(
            claim.id,
            claim.attempt_id,
            error_type="RuntimeError",
            error_message=f"failure {attempt + 1}",
            stack_trace=None,
            retry_delay=timedelta(0),
        )
    assert failed is not None and failed["in_dlq"] and failed["attempt_count"] == 2
    retried = state.retry_from_dlq(job_id_of(job))
    assert (retried["status"], retried["attempt_count"], retried["in_dlq"]) == ("pending", 0, False)
    assert retried["last_error"] is None
    history = JobAttempt.objects.filter(job_id=job["id"]).order_by("attempt_number")
    assert [a.error_message for a in history] == ["failure 1", "failure 2"]
    assert [c.id for c in state.claim(worker.id, 1)] == [job_id_of(job)]
    with pytest.raises(state.InvalidStateError) as refused:
        state.retry_from_dlq(job_id_of(job))
    assert refused.value.status == "processing"


def dlq_job(worker: Worker, **enqueue_args: Any) -> dict[str, Any]:
    job = state.enqueue("noop", {}, priority=2, max_retries=1, **enqueue_args)
    claim = claimed(worker, job)
    state.append_logs(claim.id, claim.attempt_id, [(timezone.now(), "INFO", "working")])
    failed = fail_attempt(
        claim.id,
        claim.attempt_id,
        error_type="RuntimeError",
        error_message="boom",
        stack_trace=None,
        retry_delay=timedelta(0),
    )
    assert failed is not None and failed["in_dlq"]
    return failed


def test_purge_removes_the_job_its_attempts_and_logs_and_cancels_dependents():
    worker = new_worker()
    job = dlq_job(worker)
    dependent = state.enqueue("noop", {}, priority=2, depends_on=job_id_of(job))
    assert JobLog.objects.filter(job_id=job["id"]).count() == 1
    state.purge(job_id_of(job))
    assert not Job.objects.filter(id=job["id"]).exists()
    assert not JobAttempt.objects.filter(job_id=job["id"]).exists()
    assert not JobLog.objects.filter(job_id=job["id"]).exists()
    assert Job.objects.get(id=dependent["id"]).status == "cancelled"


def test_refused_purge_changes_nothing():
    upstream = state.enqueue("noop", {}, priority=2)
    dependent = state.enqueue("noop", {}, priority=2, depends_on=job_id_of(upstream))
    with pytest.raises(state.InvalidStateError) as refused:
        state.purge(job_id_of(upstream))
    assert refused.value.status == "pending"
    assert Job.objects.get(id=upstream["id"]).status == "pending"
    assert Job.objects.get(id=dependent["id"]).status == "pending"


def test_empty_dlq_purges_every_dlq_job_and_nothing_else():
    worker = new_worker()
    dlq = [dlq_job(worker) for _ in range(3)]
    kept = state.enqueue("noop", {}, priority=2)
    assert state.empty_dlq() == 3
    assert not Job.objects.filter(id__in=[job["id"] for job in dlq]).exists()
    assert Job.objects.filter(id=kept["id"]).exists()
    assert state.empty_dlq() == 0


def test_a_job_its_live_worker_still_runs_is_never_taken_for_stuck():
    worker = new_worker()
    long_ago = timezone.now() - timedelta(hours=1)
    runs, forgotten = (claimed(worker, state.enqueue("noop", {}, priority=2)) for _ in range(2))
    Job.objects.filter(id__in=[runs.id, forgotten.id]).update(started_at=long_ago)

    # The worker's claim watch vouches for what it runs: a handler with a long timeout.
    assert state.lost_claims({runs.id: runs.attempt_id}, vouch_before=timezone.now()) == {}
    # Not 10 minutes: the rescue counts time stuck only from the database server's start,
    # which can be that recent on a machine just booted.
    rescued = state.rescue_lost(stuck_after=timedelta(minutes=1), worker_timeout=timedelta(hours=1))

    # The job it no longer runs (an outcome it could not record) is still taken back.
    assert [job["id"] for job in rescued] == [str(forgotten.id)]
    assert Job.objects.get(id=runs.id).status == "processing"
    assert JobAttempt.objects.get(id=forgotten.attempt_id).error_type == "WorkerLost"


def test_the_log_lines_of_a_report_are_written_for_the_attempts_that_still_hold_their_claim():
    worker = new_worker()
    kept, lost, gone_by = (
        claimed(worker, state.enqueue("noop", {"n": n}, priority=2)) for n in range(3)
    )
    state.cancel(lost.id)  # its attempt closed, its claim lost
    now = timezone.now()

    written = state.append_logs_of(
        [
            (kept.id, kept.attempt_id, [(now, "INFO", "kept 1"), (now, "WARNING", "kept 2")]),
            (lost.id, lost.attempt_id, [(now, "INFO", "lost")]),
            # The right job, another attempt's id: a stale claim.
            (gone_by.id, kept.attempt_id, [(now, "INFO", "stale")]),
        ]
    )

    assert written == 2
    rows = JobLog.objects.order_by("message").values_list("job_id", "attempt", "message")
    assert list(rows) == [
        (kept.id, kept.attempt_id, "kept 1"),
        (kept.id, kept.attempt_id, "kept 2"),
    ]
