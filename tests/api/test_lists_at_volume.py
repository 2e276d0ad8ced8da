"""The job lists over more history than they count exactly (`EXACT_COUNT_LIMIT`): each page
shows the same jobs in the same order as a plain ordered read of the table, and reads in
full (every column, the job object, whether the queue is paused) only the jobs it shows;
the jobs before it, or sorted past it, are read as their ids and sort keys alone. Each
request's queries are run again under EXPLAIN (ANALYZE, VERBOSE) to see what they read.

Reading whole rows for those took, at a million jobs (`seed_history`): `GET /jobs/dlq`
317 ms once 100,000 newer jobs were added (a walk of `jobs_created_idx` stepping over them);
a cursor page sorted by `attempt_count` 1.2 s; the ledger's page 5,000 0.47 s and a page past
the end 1.4 s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from jobs import state
from jobs.filters import DEFAULT_ORDERING, list_order
from jobs.models import Job
from jobs.selectors import EXACT_COUNT_LIMIT
from tests.integration.conftest import plan_nodes

# The history is made once for the module's tests, all on one xdist worker in a row: each
# reads it inside a transaction it rolls back, and no other test meets it.
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("lists_at_volume")]

JOBS = "/api/v1/jobs"
PAGE = settings.API_PAGE_SIZE
# The console's page size when a user has chosen none (`UserPreferences.page_size`).
CONSOLE_PAGE = 20
RECENT = 20_000
DEAD_LETTERS = 2_000
CANCELLED = 1_000
# The sort keys without an index of their own: a page sorted by one reads every job.
UNINDEXED_KEYS = ["attempt_count", "max_retries", "virtual_deadline"]


def execute(sql: str, params: dict[str, Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def add_jobs(count: int, status: str, *, in_dlq: bool = False, days_ago: float = 0) -> None:
    """`count` jobs of `status`, created one second apart, the newest `days_ago` days ago,
    with attempts, retries, priorities (and so deadlines) varied, so that every sort key
    orders them differently."""
    execute(
        """
        INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count,
                          max_retries, scheduled_at, in_dlq, created_at, updated_at, run_at,
                          virtual_deadline, pending_dependencies, completed_at, cancelled_at)
        SELECT gen_random_uuid(), 'noop', 'default', '{"n": 1}', 1 + n %% 3, %(status)s,
               1 + n %% 3, 3 + n %% 5, t, %(in_dlq)s, t, t, t,
               scheduler_virtual_deadline(1 + n %% 3, t), 0,
               CASE WHEN %(status)s = 'completed' THEN t END,
               CASE WHEN %(status)s = 'cancelled' THEN t END
        FROM generate_series(1, %(count)s) AS n,
             LATERAL (SELECT now() - %(days_ago)s * interval '1 day' - n * interval '1 s') AS at(t)
        """,
        {"status": status, "in_dlq": in_dlq, "count": count, "days_ago": days_ago},
    )


@pytest.fixture(scope="module")
def history(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Recent jobs, completed and cancelled, and older dead letters: the DLQ's jobs are
    behind every newer job in the default order. Committed, and deleted after the module's
    tests."""
    with django_db_blocker.unblock():
        assert not Job.objects.exists(), "the history is to be the only jobs"
        add_jobs(RECENT, "completed")
        add_jobs(CANCELLED, "cancelled")
        add_jobs(DEAD_LETTERS, "failed", in_dlq=True, days_ago=10)
        execute("ANALYZE jobs")
        assert Job.objects.count() > EXACT_COUNT_LIMIT
    yield
    with django_db_blocker.unblock():
        # Not DELETE: the inserts counted every job in the counters and metrics, which later
        # tests read, and TRUNCATE zeroes them (`scheduler_count_truncate`).
        execute("TRUNCATE jobs CASCADE")


def explained(client: Client, url: str) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """The response to `url`, and each query of it that read `jobs`, with its plan as run."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.content[:500])
    plans = []
    for query in captured:
        sql = query["sql"]
        if sql.startswith("SELECT") and 'FROM "jobs"' in sql:
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) {sql}")
                plan = cursor.fetchone()[0]
            plans.append((sql, (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]))
    assert plans, url
    return response, plans


def scans_of_jobs(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    return (node for node in plan_nodes(plan) if node.get("Relation Name") == "jobs")


def rows_read(scan: dict[str, Any]) -> int:
    return int(scan["Actual Rows"] + scan.get("Rows Removed by Filter", 0)) * int(
        scan["Actual Loops"]
    )


def read_in_full(plans: list[tuple[str, dict[str, Any]]], order: list[str]) -> int:
    """The most rows of `jobs` one query read with more than their ids and the sort keys of
    `order` (every column, a job object, a queue's pause)."""
    keys = {"id", *(key.lstrip("-") for key in order)}
    return max(
        sum(rows_read(scan) for scan in scans_of_jobs(plan) if not outputs_only(scan, keys))
        for _, plan in plans
    )


def outputs_only(scan: dict[str, Any], keys: set[str]) -> bool:
    """Whether `scan` passes on only these columns of its rows, or none (a count's scan
    outputs a constant, `NULL::uuid`)."""
    columns = {f"{scan['Alias']}.{key}" for key in keys}
    return all(out in columns or out.startswith("NULL::") for out in scan.get("Output", []))


def listed(ordering: str, *, dlq: bool = False) -> list[str]:
    """Every job's id in `ordering`, read plainly: what each page is a slice of."""
    jobs = Job.objects.filter(in_dlq=True) if dlq else Job.objects.all()
    return [str(i) for i in jobs.order_by(*list_order([ordering])).values_list("id", flat=True)]


def api_ids(response: Any) -> list[str]:
    return [job["id"] for job in response.json()["results"]]


def console_ids(response: Any) -> list[str]:
    return [str(job.id) for job in response.context["page_obj"].object_list]


@pytest.fixture
def api(history: None, viewer_client: APIClient) -> APIClient:
    return viewer_client


@pytest.fixture
def console(history: None, superuser_client: Client) -> Client:
    return superuser_client


# --- GET /jobs/dlq ---------------------------------------------------------------------------


def test_the_dlq_route_lists_what_status_dlq_lists_reading_only_its_page(api) -> None:
    """With the dead letters older than every other job, `in_dlq` alone walked
    `jobs_created_idx` from the newest job, stepping over all the newer ones."""
    dlq, plans = explained(api, f"{JOBS}/dlq")
    assert api_ids(dlq) == api_ids(api.get(JOBS, {"status": "dlq"}))
    assert api_ids(dlq) == listed(DEFAULT_ORDERING, dlq=True)[:PAGE]
    assert dlq.json()["count"] == DEAD_LETTERS
    ((_, page),) = [(sql, plan) for sql, plan in plans if "scheduler_job_object" in sql]
    assert max(rows_read(scan) for scan in scans_of_jobs(page)) <= PAGE + 1
    assert "jobs_status_created_idx" in {node.get("Index Name") for node in plan_nodes(page)}


def test_the_dlq_route_keeps_its_filters_and_cursor(api) -> None:
    everything = listed("attempt_count", dlq=True)
    first = api.get(f"{JOBS}/dlq", {"cursor": "first", "ordering": "attempt_count"})
    following = api.get(first.json()["next"])
    assert api_ids(first) + api_ids(following) == everything[: 2 * PAGE]
    assert api.get(f"{JOBS}/dlq", {"status": "completed"}).json()["results"] == []


# --- cursor pages of GET /jobs ---------------------------------------------------------------


@pytest.mark.parametrize("ordering", [*UNINDEXED_KEYS, *(f"-{key}" for key in UNINDEXED_KEYS)])
def test_a_cursor_page_sorted_by_a_key_without_an_index_reads_only_its_jobs_in_full(
    api, ordering
) -> None:
    """The sort reads every job, by its id and sort keys: the whole rows sorted and their job
    objects built made a cursor page 3-4x slower than the same page by number."""
    everything = listed(ordering)
    first, first_plans = explained(api, f"{JOBS}?cursor=first&ordering={ordering}")
    following, following_plans = explained(api, first.json()["next"])
    assert api_ids(first) + api_ids(following) == everything[: 2 * PAGE]
    assert read_in_full(first_plans, list_order([ordering])) <= PAGE + 1
    assert read_in_full(following_plans, list_order([ordering])) <= PAGE + 1


@pytest.mark.parametrize("ordering", ["-created_at", "created_at", "priority", "-scheduled_at"])
def test_a_cursor_walk_in_an_indexed_order_reads_only_its_page(api, ordering) -> None:
    everything = listed(ordering)
    response, plans = explained(api, f"{JOBS}?cursor=first&ordering={ordering}&limit=50")
    seen = api_ids(response)
    for _ in range(3):
        response, plans = explained(api, response.json()["next"])
        seen += api_ids(response)
        ((_, page),) = [(sql, plan) for sql, plan in plans if "scheduler_job_object" in sql]
        # A page, the row after it, and where a mixed-direction order's range starts: the
        # cursor's own row.
        assert max(rows_read(scan) for scan in scans_of_jobs(page)) <= 50 + 2
    assert seen == everything[:200]


# --- the console's ledger and DLQ ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ordering", "page"),
    [
        (DEFAULT_ORDERING, 1),
        (DEFAULT_ORDERING, 800),
        ("attempt_count", 1),
        ("-max_retries", 3),
        ("virtual_deadline", 600),
    ],
)
def test_a_ledger_page_reads_only_its_jobs_in_full(console, ordering, page) -> None:
    """A deep page read every job before it whole, and whether its queue was paused, and a
    page sorted by a key without an index sorted whole rows."""
    response, plans = explained(console, f"/jobs?ordering={ordering}&page={page}")
    start = (page - 1) * CONSOLE_PAGE
    assert console_ids(response) == listed(ordering)[start : start + CONSOLE_PAGE]
    assert read_in_full(plans, list_order([ordering])) <= CONSOLE_PAGE + 1


def test_a_ledger_page_past_the_end_shows_the_last_page_reading_only_its_jobs_in_full(
    console,
) -> None:
    """Past the end the ledger shows the last page: the rows before the asked-for page were
    skipped whole, then counted, then the rows before the last page skipped whole again."""
    response, plans = explained(console, "/jobs?page=100000")
    everything = listed(DEFAULT_ORDERING)
    last = -(-len(everything) // CONSOLE_PAGE)
    assert response.context["page_obj"].number == last
    assert console_ids(response) == everything[(last - 1) * CONSOLE_PAGE :]
    assert read_in_full(plans, list_order([DEFAULT_ORDERING])) <= CONSOLE_PAGE + 1


def test_a_deep_page_of_the_console_dlq_reads_only_its_jobs_in_full(console) -> None:
    """The DLQ's count is its counter's, exact, so its pages took Django's own path."""
    page = 60
    response, plans = explained(console, f"/dlq?page={page}")
    start = (page - 1) * CONSOLE_PAGE
    expected = Job.objects.filter(in_dlq=True).order_by("-updated_at", "id")
    assert console_ids(response) == [
        str(i) for i in expected.values_list("id", flat=True)[start : start + CONSOLE_PAGE]
    ]
    assert read_in_full(plans, ["-updated_at", "id"]) <= CONSOLE_PAGE + 1


# --- time bounds ---------------------------------------------------------------------------------


def test_a_before_bound_lists_a_job_whose_time_precedes_its_creation(api) -> None:
    """No time of a job is bound to follow its `created_at` (no constraint says so): a job
    enqueued and cancelled inside a caller's transaction that began earlier was updated and
    cancelled, at the transaction's start, before it was created (`created_at` is the
    enqueuing process's clock). A bound `created_at < X` added to `cancelled_before=X` or
    `updated_before=X`, to start the walk of `jobs_created_idx` there, would hide it."""
    with transaction.atomic():
        state.enqueue("noop", {})
        job = state.enqueue("noop", {})
        state.cancel(job["id"])
    row = Job.objects.get(id=job["id"])
    assert row.cancelled_at < row.created_at and row.updated_at < row.created_at
    bound = row.created_at.isoformat()
    for name in ("cancelled_before", "updated_before"):
        assert api_ids(api.get(JOBS, {name: bound}))[0] == job["id"], name
