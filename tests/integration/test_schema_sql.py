"""The SQL functions of `jobs/sql/schema.sql` against their Python twins, on the real
database the migrations built."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.representation import format_time
from jobs.scheduling import virtual_deadline
from jobs.sql import queries, query

pytestmark = pytest.mark.django_db

INSTANTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


def sql(expression: str, *params: object) -> object:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {expression}", params)
        (value,) = cursor.fetchone()
    return value


@settings(max_examples=200, deadline=None)
@given(priority=st.integers(1, 3), ready_at=INSTANTS)
def test_the_deadline_function_and_its_python_twin_agree(priority: int, ready_at: datetime) -> None:
    in_sql = sql("scheduler_virtual_deadline(%s, %s)", priority, ready_at)
    assert in_sql == virtual_deadline(priority, ready_at)


def test_the_deadline_is_twenty_minutes_per_priority_level_in_sql() -> None:
    ready_at = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # a DST night in Europe: no effect
    assert sql("scheduler_virtual_deadline(3, %s)", ready_at) == ready_at + timedelta(hours=1)


@settings(max_examples=200, deadline=None)
@given(instant=INSTANTS)
def test_the_time_function_and_its_python_twin_agree(instant: datetime) -> None:
    assert sql("scheduler_time(%s)", instant) == format_time(instant)


BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


@settings(max_examples=200, deadline=None)
@given(seconds=st.one_of(st.sampled_from(BUCKETS), st.floats(0, 10_000)))
def test_a_metric_falls_in_the_smallest_bucket_that_holds_it(seconds: float) -> None:
    assert sql("scheduler_metric_buckets()") == list(BUCKETS)
    expected = min((bound for bound in BUCKETS if bound >= seconds), default=float("inf"))
    assert sql("scheduler_metric_le(%s)", seconds) == expected


def test_the_bucket_of_a_metric_is_inlined_into_the_counters_trigger() -> None:
    # Called as a function, its body was planned again at every firing of the trigger.
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (VERBOSE) SELECT scheduler_metric_le(n) FROM generate_series(1, 9) AS n"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "width_bucket" in plan
    assert "scheduler_metric_le" not in plan


def test_no_statement_writes_the_deadline_rule_itself() -> None:
    # The rule's only interval literal is in schema.sql; the statements call the function.
    assert [name for name, body in queries().items() if "interval '" in body] == []
    assert "scheduler_virtual_deadline" in query("fail_jobs")


HOT_STATEMENTS = {
    "create_job": {
        "type": "noop",
        "queue": "default",
        "payload": "{}",
        "priority": 2,
        "max_retries": 3,
        "run_at": datetime(2026, 1, 1, tzinfo=UTC),
        "recur_interval": None,
        "now": datetime(2026, 1, 1, tzinfo=UTC),
        "pending_dependencies": 0,
        "channel": "nobody",
        "actor": None,
    },
    "create_jobs": {
        "jobs": "[]",
        "now": datetime(2026, 1, 1, tzinfo=UTC),
        "channel": "nobody",
        "feed": "{}",
    },
    "claim_jobs": {
        "worker_id": None,
        "limit": 1,
        "job_ids": None,
        "queues": None,
        "other_queues": [],
    },
    "complete_jobs": {
        "job_ids": [],
        "attempt_ids": [],
        "finished_at": [],
        "results": "[]",
        "worker_id": None,
    },
}


@pytest.mark.parametrize("name", sorted(HOT_STATEMENTS))
def test_the_hot_statements_build_the_job_object_inline(name: str) -> None:
    # Called as a function, the job object costs a call per row: the plan names the
    # function only when PostgreSQL could not inline it (a subquery in its body, say).
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (VERBOSE) {query(name)}", HOT_STATEMENTS[name])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "row_to_json" in plan
    assert "scheduler_job_object" not in plan
