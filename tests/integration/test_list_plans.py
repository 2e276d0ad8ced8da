"""A page of `GET /jobs` reads only the jobs it shows, whatever the size of the history:
- of a status, however few of its jobs there are and however old: over a month of finished
  jobs with none waiting for a retry, `status=failed` walked the whole `created_at` index,
  stepping over every row (0.2 s at a million rows, seconds with a cold cache);
- sorted by a key with an index in the list's order, either way: `ordering=priority`
  sorted every job for each page (0.4 s at a million rows);
- from a cursor, at any depth: halfway down the list by priority, the page read every job
  of the cursor's priority before it (0.16 s at a million rows)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.models import QuerySet

from jobs.api.pagination import after_cursor, encode_cursor
from jobs.models import Job
from jobs.selectors import job_list

from .conftest import plan_nodes

# The history is made once for the module's tests, all on one xdist worker in a row: each
# reads it inside a transaction it rolls back, and no other test meets it.
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("list_plans")]

PAGE = 20


def execute(sql: str, params: dict[str, Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def add_jobs(count: int, status: str, *, in_dlq: bool = False, days_ago: float = 0) -> None:
    """`count` jobs of `status`, created one second apart, the newest `days_ago` days ago."""
    execute(
        """
        INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count,
                          max_retries, scheduled_at, in_dlq, created_at, updated_at, run_at,
                          virtual_deadline, pending_dependencies, completed_at, next_retry_at)
        SELECT gen_random_uuid(), 'noop', 'default', '{}', 2, %(status)s, 1, 3, t, %(in_dlq)s,
               t, t, t, t, 0,
               CASE WHEN %(status)s = 'completed' THEN t END,
               CASE WHEN %(status)s = 'failed' AND NOT %(in_dlq)s THEN now() + interval '1 hour' END
        FROM generate_series(1, %(count)s) AS n,
             LATERAL (SELECT now() - %(days_ago)s * interval '1 day' - n * interval '1 s') AS at(t)
        """,
        {"status": status, "in_dlq": in_dlq, "count": count, "days_ago": days_ago},
    )


@pytest.fixture(scope="module")
def month_of_history(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Recent history: completed jobs, a dead-letter share, cancelled ones; and one job
    waiting for a retry and one pending, both older than all of it (a job scheduled far
    ahead, a retry of an old job). Committed, and deleted after the module's tests."""
    with django_db_blocker.unblock():
        assert not Job.objects.exists(), "the history is to be the only jobs"
        add_jobs(20_000, "completed")
        add_jobs(2_000, "failed", in_dlq=True)
        add_jobs(1_000, "cancelled")
        add_jobs(1, "failed", days_ago=40)
        add_jobs(1, "pending", days_ago=40)
        execute("ANALYZE jobs")
    yield
    with django_db_blocker.unblock():
        # Not DELETE: the inserts counted every job in the counters and metrics, which a
        # later test in this process reads (a metrics test saw 23,008 jobs created), and
        # TRUNCATE zeroes them (`scheduler_count_truncate`).
        execute("TRUNCATE jobs CASCADE")


def rows_read_from_jobs(params: dict[str, str]) -> int:
    """How many rows of `jobs` the list page of `params` read, by its plan as run."""
    return rows_read(job_list(params)[:PAGE])


def rows_read(page: QuerySet[Job]) -> int:
    root = json.loads(page.explain(format="json", analyze=True))[0]["Plan"]
    scans = [node for node in plan_nodes(root) if node.get("Relation Name") == "jobs"]
    assert scans, root
    return sum(
        int(node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * int(node["Actual Loops"])
        for node in scans
    )


@pytest.mark.parametrize(
    ("status", "shown"),
    [("failed", 1), ("pending", 1), ("processing", 0), ("dlq", PAGE), ("cancelled", PAGE)],
)
def test_a_status_page_reads_only_the_jobs_it_shows(month_of_history, status, shown) -> None:
    assert len(job_list({"status": status})[:PAGE]) == shown
    assert rows_read_from_jobs({"status": status}) <= PAGE


# The sort keys with an index in their list order (`Job.Meta.indexes`).
INDEXED_KEYS = ["priority", "created_at", "scheduled_at"]


@pytest.mark.parametrize("ordering", [*INDEXED_KEYS, *(f"-{key}" for key in INDEXED_KEYS)])
def test_a_sorted_page_reads_only_the_jobs_it_shows(month_of_history, ordering) -> None:
    assert len(job_list({"ordering": ordering})[:PAGE]) == PAGE
    assert rows_read_from_jobs({"ordering": ordering}) <= PAGE


@pytest.mark.parametrize("ordering", ["priority", "-priority", "scheduled_at", "-scheduled_at"])
def test_a_cursor_deep_in_a_sorted_list_reads_only_its_page(month_of_history, ordering) -> None:
    """Every job of the history has priority 2: halfway down the list by priority, the
    cursor's page starts in the middle of one value's jobs."""
    listed = job_list({"ordering": ordering})
    order = tuple(str(key) for key in listed.query.order_by)
    halfway = listed[10_000]
    page = listed.filter(after_cursor(encode_cursor(halfway, order), order))[:PAGE]
    assert list(page) == list(listed[10_001 : 10_001 + PAGE])
    assert rows_read(page) <= PAGE


def test_the_status_filters_keep_their_meaning(month_of_history) -> None:
    """`failed` is waiting for a retry, `dlq` the dead letters (failed, in the DLQ)."""
    assert job_list({"status": "failed"}).count() == 1
    assert set(job_list({"status": "failed"}).values_list("in_dlq", flat=True)) == {False}
    assert job_list({"status": "dlq"}).count() == 2_000
    assert set(job_list({"status": "dlq"}).values_list("status", flat=True)) == {"failed"}
    assert job_list({"status": "completed"}).count() == 20_000
