"""The job counters (`/jobs/stats`, `stats.updated`, the console's cards and DLQ badge) are
kept by the database in the transaction of every change: under a randomized concurrent
workload they equal `count(*)` over `jobs`, at the end and at every snapshot in between."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from jobs import retention, state, stats
from jobs.models import Job, JobStatus, LastPrune, Worker
from jobs.sql import query
from jobs.stats import COUNTERS, current_stats, current_stats_by_queue, fold_counts
from tests.attempts import fail_attempt
from worker.maintenance import CountFold

pytestmark = pytest.mark.django_db(transaction=True)

TYPES = ("noop", "send_email")
QUEUES = ("default", "emails", "reports")


def true_counts_by_queue() -> dict[str, dict[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT queue, CASE WHEN in_dlq THEN 'dlq' ELSE status END, count(*) FROM jobs"
            " GROUP BY 1, 2"
        )
        counted: dict[str, dict[str, int]] = {}
        for queue, key, n in cursor.fetchall():
            counted.setdefault(queue, dict.fromkeys(COUNTERS, 0))[key] = n
    return counted


def without_empty_queues(by_queue: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {queue: counts for queue, counts in by_queue.items() if any(counts.values())}


def true_counts() -> dict[str, int]:
    """What the counters must say, counted the slow way."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CASE WHEN in_dlq THEN 'dlq' ELSE status END, count(*) FROM jobs GROUP BY 1"
        )
        counted = dict.fromkeys(COUNTERS, 0) | dict(cursor.fetchall())
    return {**counted, "total": sum(counted.values())}


COUNTED_GROUPS = {
    # The totals: by job type, error signature and message.
    "totals": (
        "SELECT type, error_signature, last_error, count(*) FROM jobs WHERE in_dlq"
        " GROUP BY 1, 2, 3",
        "SELECT type, error_signature, last_error, sum(n) FROM dlq_counts WHERE bucket IS NULL"
        " GROUP BY 1, 2, 3 HAVING sum(n) <> 0",
    ),
    # The arrivals: by error signature and quarter of an hour.
    "arrivals": (
        "SELECT error_signature, scheduler_quarter_hour(updated_at), count(*) FROM jobs"
        " WHERE in_dlq GROUP BY 1, 2",
        "SELECT error_signature, bucket, sum(n) FROM dlq_counts WHERE type IS NULL"
        " GROUP BY 1, 2 HAVING sum(n) <> 0",
    ),
    # The failed attempts (`failure_counts`): by quarter of an hour.
    "failures": (
        "SELECT scheduler_quarter_hour(finished_at), count(*) FROM job_attempts"
        " WHERE status = 'failed' GROUP BY 1",
        "SELECT bucket, sum(n) FROM failure_counts GROUP BY 1 HAVING sum(n) <> 0",
    ),
}


def counted_groups_and_truth() -> dict[str, tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]]:
    """The DLQ's group counters (`dlq_counts`) and the failed attempts' (`failure_counts`)
    beside the same groups counted over `jobs` and `job_attempts`, in one snapshot."""
    both = {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for name, (truth, counted) in COUNTED_GROUPS.items():
            cursor.execute(counted)
            kept = set(cursor.fetchall())
            cursor.execute(truth)
            both[name] = (kept, set(cursor.fetchall()))
    return both


def both_in_one_snapshot() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return (
            (current_stats(), without_empty_queues(current_stats_by_queue())),
            (true_counts(), true_counts_by_queue()),
        )


def new_worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="counts-test", pid=1, started_at=now, heartbeat_at=now)


def payload(job_type: str) -> dict[str, Any]:
    return {"to": "a@example.com", "subject": "s"} if job_type == "send_email" else {}


class Actor:
    """One thread of the workload, on its own database connection."""

    def __init__(self, seed: int, stop: threading.Event, done: Counter[str]) -> None:
        self.rng = random.Random(seed)
        self.stop = stop
        self.done = done
        self.errors: list[BaseException] = []
        self.claimed: list[state.ClaimedJob] = []

    def run(self) -> None:
        try:
            self.worker = new_worker()
            actions: list[tuple[int, Callable[[], str | None]]] = [
                (6, self.create),
                (1, self.create_many),
                (1, self.create_dependent),
                (5, self.claim),
                (4, self.complete),
                (4, self.fail),
                (2, self.cancel),
                (2, self.retry),
                (1, self.purge),
                (1, self.rescue),
                (1, self.prune),
                (1, self.fold),
            ]
            weights = [weight for weight, _ in actions]
            while not self.stop.is_set():
                (action,) = self.rng.choices([a for _, a in actions], weights)
                try:
                    name = action()
                except (state.InvalidStateError, state.JobNotFound):
                    name = "refused"  # another actor got there first: a lost race
                if name:
                    self.done[name] += 1
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            connections.close_all()

    def some_job(self, **filters: Any) -> uuid.UUID | None:
        ids = list(Job.objects.filter(**filters).values_list("id", flat=True)[:20])
        return self.rng.choice(ids) if ids else None

    def create(self) -> str:
        job_type = self.rng.choice(TYPES)
        state.enqueue(
            job_type,
            payload(job_type),
            max_retries=self.rng.choice((1, 2)),
            queue=self.rng.choice(QUEUES),
        )
        return "create"

    def create_many(self) -> str:
        count = self.rng.randint(2, 30)
        queue = self.rng.choice(QUEUES)
        state.enqueue_many(
            state.JobSpec("noop", {}, max_retries=1, queue=queue) for _ in range(count)
        )
        return "create_many"

    def create_dependent(self) -> str | None:
        upstream = self.some_job(status__in=[JobStatus.PENDING, JobStatus.COMPLETED])
        if upstream is None:
            return None
        try:
            state.enqueue("noop", {}, depends_on=upstream)
        except state.JobValidationError:
            return "refused"  # the upstream was cancelled or purged meanwhile
        return "create_dependent"

    def claim(self) -> str:
        self.claimed += state.claim(self.worker.id, self.rng.randint(1, 8))
        return "claim"

    def take_claimed(self) -> state.ClaimedJob | None:
        if not self.claimed:
            return None
        return self.claimed.pop(self.rng.randrange(len(self.claimed)))

    def complete(self) -> str | None:
        taken = [job for job in (self.take_claimed() for _ in range(3)) if job]
        if not taken:
            return None
        state.complete(
            [state.Success(j.id, j.attempt_id, None, timezone.now()) for j in taken],
            self.worker.id,
        )
        return "complete"

    def fail(self) -> str | None:
        job = self.take_claimed()
        if job is None:
            return None
        fail_attempt(
            job.id,
            job.attempt_id,
            error_type="Boom",
            # Two messages of one signature, and another: the DLQ's groups tell them apart.
            error_message=self.rng.choice(("boom at 1", "boom at 2", "timeout")),
            stack_trace=None,
            retry_delay=timedelta(0),
        )
        return "fail"

    def cancel(self) -> str | None:
        job_id = self.some_job(status__in=[JobStatus.PENDING, JobStatus.PROCESSING])
        if job_id is None:
            return None
        state.cancel(job_id)
        return "cancel"

    def retry(self) -> str | None:
        job_id = self.some_job(in_dlq=True)
        if job_id is None:
            return None
        state.retry_from_dlq(job_id)
        return "retry"

    def purge(self) -> str:
        if self.rng.random() < 0.2:
            state.empty_dlq()
            return "empty_dlq"
        job_id = self.some_job(in_dlq=True)
        if job_id is not None:
            state.purge(job_id)
        return "purge"

    def rescue(self) -> str:
        # This actor's own running jobs are taken back, as a forced shutdown does; the
        # outcomes it still holds for them are then refused by their fencing tokens.
        state.release(self.worker.id, "released by the counts test")
        return "rescue"

    def prune(self) -> str:
        # Some finished jobs are made a week old, then a batch past the retention is pruned.
        # Rows another actor holds are skipped: waiting on them, in random order, deadlocked.
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE jobs SET completed_at = completed_at - interval '8 days',"
                " cancelled_at = cancelled_at - interval '8 days'"
                " WHERE id IN (SELECT id FROM jobs WHERE status IN ('completed', 'cancelled')"
                " ORDER BY random() LIMIT 5 FOR UPDATE SKIP LOCKED)"
            )
        retention.prune(limit=self.rng.randint(1, 10), continues=False)
        return "prune"

    def fold(self) -> str:
        fold_counts()
        stats.fold_dlq_counts()
        stats.fold_failure_counts()
        return "fold"


def test_counters_equal_count_star_under_a_concurrent_randomized_workload() -> None:
    stop = threading.Event()
    done: Counter[str] = Counter()
    actors = [Actor(seed, stop, done) for seed in range(4)]
    threads = [threading.Thread(target=actor.run) for actor in actors]
    for thread in threads:
        thread.start()
    snapshots = 0
    deadline = time.monotonic() + 6.0
    try:
        while time.monotonic() < deadline:
            counters, truth = both_in_one_snapshot()
            assert counters == truth
            for name, (counted, dead) in counted_groups_and_truth().items():
                assert counted == dead, name
            snapshots += 1
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert [error for actor in actors for error in actor.errors] == []
    # Every kind of change really happened, so the equality below covers each of them.
    for action in ("create", "create_many", "create_dependent", "claim", "complete", "fail"):
        assert done[action] > 0, done
    for action in ("cancel", "retry", "purge", "empty_dlq", "rescue", "prune", "fold"):
        assert done[action] > 0, done
    assert snapshots > 10
    counters = current_stats()
    assert counters == true_counts()
    assert without_empty_queues(current_stats_by_queue()) == true_counts_by_queue()
    assert set(true_counts_by_queue()) == set(QUEUES)
    assert counters["total"] > 0 and counters["dlq"] + counters["completed"] > 0
    assert LastPrune.objects.get().jobs > 0
    fold_counts()
    assert current_stats() == counters
    stats.fold_dlq_counts()
    stats.fold_failure_counts()
    for name, (counted, dead) in counted_groups_and_truth().items():
        assert counted == dead, name


def test_the_stats_read_never_touches_the_jobs_table() -> None:
    state.enqueue("noop", {})
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + query("job_stats"))
        (plan,) = cursor.fetchone()
    relations = {
        node["Relation Name"] for node in plan_nodes(plan[0]["Plan"]) if "Relation Name" in node
    }
    assert relations == {"job_counts"}
    assert current_stats()["pending"] == 1


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in plan_nodes(child))]


def test_counters_follow_a_truncate_and_a_recount_repairs_them() -> None:
    state.enqueue_many(state.JobSpec("noop", {}) for _ in range(3))
    assert current_stats()["pending"] == 3
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs CASCADE")
    assert current_stats() == dict.fromkeys([*COUNTERS, "total"], 0)
    state.enqueue("noop", {})
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO job_counts (key, n) VALUES ('completed', 5)")  # damage
        cursor.execute("SELECT scheduler_recount_jobs()")
    assert current_stats() == true_counts()
    assert without_empty_queues(current_stats_by_queue()) == true_counts_by_queue()
    assert current_stats()["pending"] == 1


def test_a_fold_leaves_one_row_per_counter_and_a_big_backlog_is_folded_by_its_reader() -> None:
    for _ in range(3):
        state.enqueue("noop", {})
    unit = CountFold(interval=1.0)  # what every worker runs each second
    expected = {"folded": 3, "dlq_folded": 0, "failures_folded": 0, "metrics_folded": 3}
    assert unit.run_once() == expected
    assert unit.run_once() == dict.fromkeys(expected, 0)  # one row per counter
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO job_counts (key, n) SELECT 'pending', 0 FROM generate_series(1, 2500)"
        )
    assert current_stats()["pending"] == 3  # read, then folded by the reader
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM job_counts")
        assert cursor.fetchone() == (1,)


def test_a_burst_of_changes_is_one_stats_updated_carrying_all_of_them(
    events: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stats.stats_publisher.flush()  # nothing of an earlier test's left to come
    events.drain(0.1)
    events.received.clear()
    monkeypatch.setattr(stats, "stats_publisher", stats.StatsPublisher())
    settings.SCHEDULER_STATS_INTERVAL = 3600
    state.enqueue("noop", {})
    assert events.wait_for("stats.updated")["data"]["pending"] == 1  # the first at once
    for _ in range(20):
        state.enqueue("noop", {})
    state.enqueue_many([state.JobSpec("noop", {})] * 3)
    # Within the hour none of the burst is published; a flush (a stopping worker) sends it.
    assert stats.stats_publisher.flush()
    events.wait_for("stats.updated", lambda data: data["pending"] == 24)
    published = [e["data"]["pending"] for e in events.received if e["type"] == "stats.updated"]
    assert published == [1, 24]


def test_the_dlq_groups_fold_to_one_row_each_drop_old_arrivals_and_a_recount_repairs_them() -> None:
    worker = new_worker()
    for message in ("boom at 1", "boom at 2", "timeout"):
        job = state.enqueue("noop", {}, max_retries=1)
        (claimed,) = state.claim(worker.id, 1)
        assert str(claimed.id) == job["id"]
        fail_attempt(
            claimed.id,
            claimed.attempt_id,
            error_type="Boom",
            error_message=message,
            stack_trace=None,
            retry_delay=timedelta(0),
        )
    with connection.cursor() as cursor:
        # Arrivals a month old: no chart shows them, the fold drops them.
        cursor.execute(
            "INSERT INTO dlq_counts (error_signature, bucket, n)"
            " VALUES ('noop · Boom: timeout', now() - interval '30 days', 4)"
        )
    rows = 2 * 3 + 1  # a total and an arrival per dead letter, and the old arrival
    assert stats.fold_dlq_counts() == rows
    counted, truth = counted_groups_and_truth()["totals"]
    assert (
        counted
        == truth
        == {
            ("noop", "noop · Boom: boom at N", "boom at 1", 1),
            ("noop", "noop · Boom: boom at N", "boom at 2", 1),
            ("noop", "noop · Boom: timeout", "timeout", 1),
        }
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT error_signature, sum(n) FROM dlq_counts WHERE type IS NULL"
            " GROUP BY 1 ORDER BY 1"
        )
        assert cursor.fetchall() == [("noop · Boom: boom at N", 2), ("noop · Boom: timeout", 1)]
        cursor.execute("UPDATE dlq_counts SET n = 7")  # damage
        cursor.execute("SELECT scheduler_recount_dlq()")
    for counted, truth in counted_groups_and_truth().values():
        assert counted == truth
