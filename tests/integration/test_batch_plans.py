"""A batch's work grows with the batch, never with its square: no statement of a claim or a
completion, nor any trigger they fire, compares the batch's rows pairwise, whatever the
planner's statistics say.

Both went quadratic. The counters' triggers joined their two transition tables with the
plan PL/pgSQL kept from the first firing (one row each). The completion could reach its
jobs through the partial indexes of processing rows, which statistics taken while the
workers were idle put at one row: in a drain the planner ran every outcome against each of
them. A worker that fell behind then completed ever larger batches ever more slowly (13,000
outcomes in one statement: 31 s, with the heartbeat waiting behind it). auto_explain shows
every statement's plan as it ran, the triggers' included."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from psycopg.errors import Diagnostic

from jobs import state
from jobs.stats import stats_publisher

from .conftest import forget_statistics, plan_nodes

pytestmark = pytest.mark.django_db(transaction=True)

BATCH = 300


def execute(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)


@contextmanager
def plans_run() -> Iterator[list[dict[str, Any]]]:
    """The plans of every statement run on this connection meanwhile, nested ones included,
    with their actual row counts (auto_explain, sent to this client as LOG messages)."""
    plans: list[dict[str, Any]] = []

    def take(notice: Diagnostic) -> None:
        message = notice.message_primary or ""
        if notice.severity_nonlocalized == "LOG" and "plan:" in message:
            plans.append(json.loads(message.split("plan:", 1)[1])["Plan"])

    connection.ensure_connection()
    raw = connection.connection
    raw.add_notice_handler(take)
    execute("LOAD 'auto_explain'")
    for setting, value in [
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_nested_statements", "on"),
        ("auto_explain.log_format", "json"),
        ("client_min_messages", "log"),
    ]:
        execute(f"SET {setting} = {value}")
    try:
        yield plans
    finally:
        execute("RESET client_min_messages")
        execute("RESET auto_explain.log_min_duration")
        raw.remove_notice_handler(take)


def pairs_compared(plans: list[dict[str, Any]]) -> int:
    """Rows a join looked at and threw away: n² - n for a nested loop over two n-row sets."""
    return sum(
        int(node.get("Rows Removed by Join Filter", 0) * node.get("Actual Loops", 1))
        for plan in plans
        for node in plan_nodes(plan)
    )


def history() -> None:
    """Finished jobs, as a day of work leaves them (the pruner keeps a week)."""
    execute(
        """
        INSERT INTO jobs (id, type, payload, priority, status, attempt_count, max_retries,
                          scheduled_at, in_dlq, created_at, updated_at, run_at,
                          virtual_deadline, pending_dependencies, completed_at)
        SELECT scheduler_uuid7(), 'noop', '{}', 2, 'completed', 1, 3, now(), false, now(),
               now(), now(), scheduler_virtual_deadline(2, now()), 0, now()
        FROM generate_series(1, 20000)
        """
    )


@pytest.fixture
def idle_statistics() -> Iterator[None]:
    """What ANALYZE leaves when it ran while nothing was processing, which autovacuum does
    whenever the workers are idle; kept so for the test."""
    execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    execute("ALTER TABLE job_attempts SET (autovacuum_enabled = false)")
    history()
    state.enqueue_many(state.JobSpec("noop", {}) for _ in range(BATCH))
    execute("ANALYZE jobs, job_attempts")
    yield
    # The coalesced stats.updated of this test's changes, while its database is there.
    stats_publisher.flush()
    execute("ALTER TABLE jobs RESET (autovacuum_enabled)")
    execute("ALTER TABLE job_attempts RESET (autovacuum_enabled)")
    # The next test of this process must not plan with this one's statistics.
    forget_statistics("jobs", "job_attempts")


def warm_up(worker_id: uuid.UUID) -> None:
    """A worker that started on a quiet system: its first claims and completions are of a
    job each, when PL/pgSQL plans each trigger statement for good; then of a few jobs each,
    when psycopg prepares the hot statements and PostgreSQL settles on their plans."""
    for size in [1] * 3 + [20] * 12:
        jobs = state.enqueue_many(state.JobSpec("noop", {}) for _ in range(size))
        claimed = state.claim(worker_id, size, [uuid.UUID(str(job["id"])) for job in jobs])
        state.complete(
            [state.Success(c.id, c.attempt_id, None, timezone.now()) for c in claimed], worker_id
        )


def test_claiming_and_completing_a_batch_never_compares_its_rows_pairwise(
    test_handlers: None, idle_statistics: None
) -> None:
    worker_id = uuid.uuid4()
    warm_up(worker_id)
    waiting = [row["id"] for row in state.runnable_jobs(horizon=timezone.now(), limit=BATCH)]
    assert len(waiting) == BATCH

    with plans_run() as claim_plans:
        claimed = state.claim(worker_id, BATCH, waiting)
    with plans_run() as completion_plans:
        report = state.complete(
            [state.Success(c.id, c.attempt_id, {"n": 1}, timezone.now()) for c in claimed],
            worker_id,
        )

    assert len(claimed) == len(report.completed) == BATCH
    # Each plan was seen, the triggers' among them (the counters' and the metrics').
    assert len(claim_plans) >= 3 and len(completion_plans) >= 4
    # Quadratic, each of those joins threw away BATCH² - BATCH = 89,700 rows.
    assert pairs_compared(claim_plans) < BATCH
    assert pairs_compared(completion_plans) < BATCH
    # The completion looks each job up by its key: no plan through the processing rows,
    # however many the statistics think there are.
    (completion,) = [plan for plan in completion_plans if "outcome" in ctes_of(plan)]
    assert scans_of_jobs(completion) == {("Index Scan", "jobs_pkey")}


def ctes_of(plan: dict[str, Any]) -> set[str]:
    return {node["CTE Name"] for node in plan_nodes(plan) if "CTE Name" in node}


def scans_of_jobs(plan: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {
        (node["Node Type"], node.get("Index Name"))
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "jobs" and "Scan" in node["Node Type"]
    }
