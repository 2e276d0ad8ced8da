"""The feeder reads the claimable partial index, and the claim only the rows it claims, by
primary key, whatever the planner's statistics say: never analyzed, analyzed while empty and
then a burst of 50,000 jobs, or stale (analyzed when every job had finished, then a burst),
and a plan made while few jobs waited, kept over a burst. EXPLAIN shows the plan in each
state. The worker's prepared claim and completion are planned once, not at
every call."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.queue_names import ALL_QUEUES, QueueSelection
from jobs.sql import query

from .conftest import forget_statistics, plan_nodes

pytestmark = pytest.mark.django_db(transaction=True)

BURST = 50_000


def execute(sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def burst(status: str = "pending", queue: str = "default") -> None:
    """50,000 jobs in one statement, as a bulk enqueue would leave them."""
    execute(
        """
        INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count,
                          max_retries, scheduled_at, in_dlq, created_at, updated_at, run_at,
                          virtual_deadline, pending_dependencies, completed_at)
        SELECT gen_random_uuid(), 'noop', %(queue)s, '{}', 1 + n %% 3, %(status)s, 0, 3,
               now() - n * interval '1 ms', false, now(), now(), now() - n * interval '1 ms',
               scheduler_virtual_deadline(1 + n %% 3, now() - n * interval '1 ms'), 0,
               CASE WHEN %(status)s = 'completed' THEN now() END
        FROM generate_series(1, %(count)s) AS n
        """,
        {"status": status, "queue": queue, "count": BURST},
    )


@pytest.fixture(autouse=True)
def no_autovacuum() -> Iterator[None]:
    # Each state must stay what the test made it while it is explained.
    execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    yield
    execute("ALTER TABLE jobs RESET (autovacuum_enabled)")


def never_analyzed() -> None:
    forget_statistics("jobs")
    burst()


def analyzed_empty_then_burst() -> None:
    # ANALYZE of an empty table keeps the statistics an earlier test's rows left. Empty on
    # disk too, as VACUUM leaves a table whose rows were all deleted: the rows an earlier
    # test inserted and rolled back left pages, and ANALYZE of 0 rows in N pages makes the
    # planner take any later burst for an empty table (ARCHITECTURE.md, "The claim's plan",
    # says what a claim costs then). Which earlier tests ran in this process decided it.
    forget_statistics("jobs")
    execute("VACUUM jobs")
    execute("ANALYZE jobs")
    burst()


def stale() -> None:
    burst(status="completed")
    execute("ANALYZE jobs")
    burst()


def analyzed() -> None:
    burst()
    execute("ANALYZE jobs")


def plan_of(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    ((plan,),) = execute("EXPLAIN (FORMAT JSON) " + sql, params)
    return plan[0]["Plan"]


def prepared_plan_of(
    sql: str,
    params: dict[str, Any],
    meanwhile: Callable[[], object] = lambda: None,
    explained: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The plan of `sql` prepared on the server, as the worker's claim is, after the runs
    that let PostgreSQL switch to a generic plan if it estimates one no worse: for
    `explained` (default `params`), once `meanwhile` has run after those runs."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    execute_prepared = "EXECUTE prepared_claim(" + ", ".join(["%s"] * len(names)) + ")"
    execute("PREPARE prepared_claim AS " + numbered.replace("%%", "%"))
    try:
        for _ in range(6):
            execute(execute_prepared, [params[name] for name in names])
        meanwhile()
        arguments = [(explained or params)[name] for name in names]
        ((plan,),) = execute("EXPLAIN (FORMAT JSON) " + execute_prepared, arguments)
    finally:
        execute("DEALLOCATE prepared_claim")
    return plan[0]["Plan"]


def scans_of_jobs(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [
        (node["Node Type"], node.get("Index Name"))
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "jobs"
    ]


def claim_select() -> str:
    """The claim's choice of jobs: the first CTE of `claim_jobs`."""
    claim = query("claim_jobs")
    start = claim.index("WITH due AS (") + len("WITH due AS (")
    return claim[start : re.compile(r"\n\), \w+ AS \(").search(claim, start).start()]


STATES = [never_analyzed, analyzed_empty_then_burst, stale, analyzed]


@pytest.mark.parametrize("make_state", STATES, ids=lambda f: f.__name__)
def test_the_feeder_walks_the_claimable_index_and_a_claim_by_id_never_scans_the_table(
    make_state,
) -> None:
    make_state()
    feed = query("runnable_jobs")
    params = {
        "horizon": timezone.now(),
        "job_ids": None,
        "limit": 250,
        "unhandled_types": [],
        **ALL_QUEUES.params(),
    }
    # As planned for these parameters, and as the worker's prepared statement runs them.
    for plan in (plan_of(feed, params), prepared_plan_of(feed, params)):
        assert scans_of_jobs(plan) == [("Index Scan", "jobs_claimable_idx")]
        # The index is in claim order: the first 250 entries are the claim, nothing is sorted.
        assert "Sort" not in {node["Node Type"] for node in plan_nodes(plan)}

    ids = [row[0] for row in execute("SELECT id FROM jobs ORDER BY virtual_deadline LIMIT 250")]
    params = {"job_ids": ids, "limit": 250, **ALL_QUEUES.params()}
    assert_reads_only_the_claimed_rows(plan_of(claim_select(), params))
    assert_reads_only_the_claimed_rows(prepared_plan_of(claim_select(), params))


def assert_reads_only_the_claimed_rows(plan: dict[str, Any]) -> None:
    (scan,) = scans_of_jobs(plan)
    # A look-up of each id in the primary key, never a walk of the claimable index, which
    # would step over every more urgent job the claim does not take.
    assert scan in {("Bitmap Heap Scan", None), ("Index Scan", "jobs_pkey")}
    if scan == ("Bitmap Heap Scan", None):
        (heap,) = [n for n in plan_nodes(plan) if n.get("Relation Name") == "jobs"]
        assert {n["Index Name"] for n in plan_nodes(heap) if "Index Name" in n} == {"jobs_pkey"}


def test_a_claim_planned_while_few_jobs_waited_reads_only_its_rows(test_handlers) -> None:
    """The worker's connection keeps the plan it made at its first claims. Made while few
    jobs waited, it walked the claimable index, and kept walking once 50,000 more urgent
    jobs of a queue this worker does not serve arrived: each claim stepped over all of
    them (53-57 ms for one job, until the next ANALYZE)."""
    forget_statistics("jobs")
    first, mine = (uuid.UUID(str(state.enqueue("noop", {})["id"])) for _ in range(2))
    served = QueueSelection(only=("default",)).params()
    plan = prepared_plan_of(
        claim_select(),
        {"job_ids": [first], "limit": 1, **served},
        meanwhile=lambda: burst(queue="reports"),
        explained={"job_ids": [mine], "limit": 1, **served},
    )
    assert_reads_only_the_claimed_rows(plan)


def test_the_prepared_claim_is_planned_once(test_handlers) -> None:
    """Planning the claim took longer than running it (1.2-1.8 ms against 0.3-0.5 ms for one
    job), so the worker's connection plans it once and keeps the plan, also over a backlog,
    where a plan for any ids would be a scan of every runnable job."""
    analyzed()
    worker_id, calls = uuid.uuid4(), 20
    for _ in range(calls):
        job_id = uuid.UUID(str(state.enqueue("noop", {})["id"]))
        (claimed,) = state.claim(worker_id, 1, [job_id])
        assert claimed.id == job_id
    ((generic, custom),) = execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE starts_with(statement, %s)",
        [query("claim_jobs").splitlines()[0]],
    )
    # psycopg prepares a statement on its sixth call (its `prepare_threshold`), and
    # PostgreSQL plans a prepared statement for its parameters five times before it weighs
    # a generic plan: every later call runs the kept plan.
    assert (generic, custom) == (calls - 10, 5)


def test_the_prepared_completion_is_planned_once(test_handlers) -> None:
    """A worker that finishes one job at a time completes it alone: PostgreSQL planned each
    such completion anew (0.8 ms, longer than running it), so it keeps one plan too."""
    analyzed()
    worker_id, calls = uuid.uuid4(), 20
    for _ in range(calls):
        job_id = uuid.UUID(str(state.enqueue("noop", {})["id"]))
        (claimed,) = state.claim(worker_id, 1, [job_id])
        report = state.complete(
            [state.Success(claimed.id, claimed.attempt_id, None, timezone.now())], worker_id
        )
        assert [job["id"] for job in report.completed] == [str(job_id)]
    ((generic, custom),) = execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE starts_with(statement, %s)",
        [query("complete_jobs").splitlines()[0]],
    )
    assert (generic, custom) == (calls - 10, 5)
