"""The admin's pages cost a bounded number of queries, none of them over a whole table,
however many rows a job or the audit log has."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import audit, queues, state
from jobs.admin import ATTEMPTS_SHOWN, LOG_LINES_SHOWN
from jobs.models import AuditEntry, Job
from jobs.representation import short_id
from tests.integration.conftest import plan_nodes

from .helpers import dead_letter

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/admin/jobs/job/"
DLQ = "/admin/jobs/deadletterjob/"
AUDIT = "/admin/jobs/auditentry/"


def sql_of(client: Client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [query["sql"] for query in captured]


def execute(sql: str, params: dict[str, Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def rows_read(client: Client, url: str, table: str) -> int:
    """The rows of `table` the queries of the page at `url` read, by their plans as run
    again: each row a scan returned or filtered out, and each pair a join compared and
    dropped (a nested loop's)."""
    read = 0
    for sql in sql_of(client, url):
        if f'"{table}"' not in sql or sql.startswith("EXPLAIN"):
            continue
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
            (plan,) = cursor.fetchone()
        nodes = list(plan_nodes((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]))
        for node in nodes:
            scanned = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            read += int(
                (scanned if node.get("Relation Name") == table else 0)
                + node.get("Rows Removed by Join Filter", 0)
            ) * int(node["Actual Loops"])
    return read


# --- a fan-in job's page -----------------------------------------------------------------------


def fan_in(upstream: int) -> Job:
    """A job waiting for `upstream` jobs, the first of which has completed."""
    ids = [uuid.UUID(state.enqueue("noop", {"n": n})["id"]) for n in range(upstream)]
    Job.objects.filter(id=ids[0]).update(status="completed", completed_at=timezone.now())
    return Job.objects.get(id=state.enqueue("noop", {}, depends_on=ids)["id"])


def test_a_fan_in_jobs_page_costs_the_same_queries_however_many_upstream_jobs_it_has(
    superuser_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job waiting for 1,000 upstream jobs took ~1,008 queries (3 s): every dependency
    row was shown, each loading its upstream job."""
    monkeypatch.setattr("jobs.admin.UPSTREAM_SHOWN", 4, raising=False)
    few, many = fan_in(2), fan_in(12)

    page = superuser_client.get(f"{JOBS}{many.id}/change/").content.decode()
    few_sql = sql_of(superuser_client, f"{JOBS}{few.id}/change/")
    many_sql = sql_of(superuser_client, f"{JOBS}{many.id}/change/")

    assert len(many_sql) == len(few_sql)
    heading = "Runs after (4 of 12 upstream jobs shown, unfinished first: 8 more not shown)"
    assert heading in page
    upstream = page.split(heading)[1].split("</fieldset>")[0]
    assert upstream.count('<td class="field-upstream_status">') == 4
    assert "Pending" in upstream and "Completed" not in upstream


# --- a long-lived job's page ------------------------------------------------------------------


def add_history(jobs: int, *, lines: int) -> None:
    """`jobs` completed jobs, each with one attempt and `lines` log lines."""
    execute(
        """
        WITH made AS (
            INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count,
                              max_retries, scheduled_at, in_dlq, created_at, updated_at,
                              run_at, virtual_deadline, pending_dependencies, completed_at)
            SELECT gen_random_uuid(), 'noop', 'default', '{}', 2, 'completed', 1, 3, now(),
                   false, now(), now(), now(), now(), 0, now()
            FROM generate_series(1, %(jobs)s)
            RETURNING id
        ), tried AS (
            INSERT INTO job_attempts (id, attempt_number, status, started_at, finished_at, job_id)
            SELECT gen_random_uuid(), 1, 'succeeded', now(), now(), id FROM made
            RETURNING id, job_id
        )
        INSERT INTO job_logs (created_at, level, message, attempt_id, job_id)
        SELECT now(), 'INFO', 'done', tried.id, tried.job_id
        FROM tried, generate_series(1, %(lines)s)
        """,
        {"jobs": jobs, "lines": lines},
    )


def shown_cells(page: str, column: str) -> list[str]:
    return re.findall(rf'<td class="field-{column}">\s*<p>([^<]*)</p>', page)


@pytest.mark.django_db  # in one transaction: ANALYZE's statistics stay as taken until its end
def test_a_job_page_reads_only_the_log_lines_and_attempts_it_shows(
    superuser_client: Client,
) -> None:
    """A job with 100,000 log lines, newer than the statistics, took 3.2-3.9 s: its 200
    newest lines were asked for inside the formset's query (`id IN (... LIMIT 200)`), and
    the planner, taking the job for a job of one row, compared each of its lines with each of
    those 200. Its 300 attempts were all shown, 0.8-0.95 s and a 1.1 MB page."""
    add_history(30_000, lines=1)
    execute("ANALYZE job_logs")
    execute("ANALYZE job_attempts")
    job_id = state.enqueue("noop", {})["id"]
    lines, attempts = 10 * LOG_LINES_SHOWN, 3 * ATTEMPTS_SHOWN
    execute(
        """
        INSERT INTO job_attempts (id, attempt_number, status, started_at, finished_at,
                                  error_type, error_message, job_id)
        SELECT gen_random_uuid(), n, 'failed', now() - (%(attempts)s - n) * interval '1 min',
               now() - (%(attempts)s - n) * interval '1 min', 'RuntimeError', 'failure ' || n,
               %(job)s
        FROM generate_series(1, %(attempts)s) AS n;
        INSERT INTO job_logs (created_at, level, message, job_id)
        SELECT now() - (%(lines)s - n) * interval '1 s', 'INFO', 'line ' || n, %(job)s
        FROM generate_series(1, %(lines)s) AS n
        """,
        {"job": job_id, "lines": lines, "attempts": attempts},
    )
    url = f"{JOBS}{job_id}/change/"

    page = superuser_client.get(url).content.decode()

    newest_lines = [f"line {n}" for n in range(lines - LOG_LINES_SHOWN + 1, lines + 1)]
    assert shown_cells(page, "message") == newest_lines
    assert f"Logs (newest {LOG_LINES_SHOWN} lines)" in page
    assert rows_read(superuser_client, url, "job_logs") <= 2 * LOG_LINES_SHOWN
    newest_attempts = [str(n) for n in range(attempts - ATTEMPTS_SHOWN + 1, attempts + 1)]
    assert shown_cells(page, "attempt_number") == newest_attempts
    assert f"Attempts (newest {ATTEMPTS_SHOWN}, oldest first)" in page
    assert rows_read(superuser_client, url, "job_attempts") <= 2 * ATTEMPTS_SHOWN


# --- the job lists ------------------------------------------------------------------------------


def test_the_job_lists_cost_the_same_queries_however_many_pending_jobs_they_show(
    superuser_client: Client,
) -> None:
    """A pending job's status label asked whether its queue is paused, one query a row."""
    queues.pause("reports")
    state.enqueue("noop", {}, queue="reports")
    few = [len(sql_of(superuser_client, url)) for url in (JOBS, f"{JOBS}?status__exact=pending")]
    for n in range(10):
        state.enqueue("noop", {"n": n}, queue="reports" if n % 2 else "default")
    many = [len(sql_of(superuser_client, url)) for url in (JOBS, f"{JOBS}?status__exact=pending")]

    assert many == few
    page = superuser_client.get(JOBS).content.decode()
    assert page.count("Pending · waiting in a paused queue") == 6
    assert page.count('<span class="state-pending">Pending</span>') == 5


# --- the job search -----------------------------------------------------------------------------


def test_a_job_search_finds_the_start_of_an_id_or_of_a_type_without_scanning_the_jobs(
    superuser_client: Client,
) -> None:
    """Anything but a full id was `UPPER(type) LIKE 'TERM%'`, which no index holds: 650-725 ms
    at a million jobs, and no job found for the first digits of an id."""
    noops = [state.enqueue("noop", {"n": n})["id"] for n in range(3)]
    email = state.enqueue("send_email", {"to": "a@b.c", "subject": "s"})["id"]
    wanted = noops[1]

    def listed(term: str) -> set[str]:
        url = f"{JOBS}?q={term}"
        over_jobs = [sql.upper() for sql in sql_of(superuser_client, url) if '"jobs"' in sql]
        assert [sql for sql in over_jobs if " LIKE " in sql or "UPPER(" in sql] == [], term
        response = superuser_client.get(url)
        return {str(job.id) for job in response.context["cl"].result_list}

    by_time = listed(wanted[:8])  # jobs created in the same minute begin alike
    assert wanted in by_time and all(job_id.startswith(wanted[:8]) for job_id in by_time)
    distinct = wanted[:23]  # past the creation time, into the random digits
    assert listed(distinct) == {wanted}
    assert listed(distinct.replace("-", "").upper()) == {wanted}
    assert listed(wanted) == {wanted}
    assert listed("SEND") == {email}
    assert listed("no") == set(noops)
    assert listed("zzz") == set()


@pytest.mark.django_db  # in one transaction: ANALYZE's statistics stay as taken until its end
def test_a_job_search_finds_the_short_id_the_console_shows_among_the_newest_jobs(
    superuser_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console names a job by its id's last 8 digits (`short_id`: the first ones are its
    creation time, alike for a minute's jobs), and the admin's search found no job for them.
    No index holds an id's end: it is looked for among the newest jobs of the list, in the
    list's own order, never over the whole table."""
    monkeypatch.setattr("jobs.admin.SHORT_ID_SEARCH_ROWS", 1_000)
    execute(
        """
        INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count,
                          max_retries, scheduled_at, in_dlq, created_at, updated_at,
                          run_at, virtual_deadline, pending_dependencies, completed_at)
        SELECT gen_random_uuid(), 'noop', 'default', '{}', 2, 'completed', 1, 3, now(),
               false, now() - n * interval '1 s', now(), now(), now(), 0, now()
        FROM generate_series(1, 20000) AS n
        """
    )
    execute("ANALYZE jobs")
    wanted = state.enqueue("noop", {})["id"]
    dead = dead_letter("flaky")["id"]
    oldest = str(Job.objects.order_by("created_at").values_list("id", flat=True)[0])

    def listed(term: str, url: str = JOBS) -> set[str]:
        response = superuser_client.get(f"{url}?q={term}")
        return {str(job.id) for job in response.context["cl"].result_list}

    assert listed(short_id(wanted)) == {wanted}
    assert listed(f" {short_id(wanted).upper()} ") == {wanted}
    assert listed(wanted[-12:]) == {wanted}  # the id's whole last group
    assert listed(wanted) == {wanted}
    assert listed(short_id(dead), DLQ) == {dead}
    assert listed(short_id(dead)) == {dead}
    # Past the newest 1,000 jobs, a job is found by its full id only.
    assert listed(short_id(oldest)) == set()
    assert listed(oldest) == {oldest}
    assert rows_read(superuser_client, f"{JOBS}?q={short_id(wanted)}", "jobs") <= 3_000


# --- the audit log ------------------------------------------------------------------------------


def log(n: int, *, action: str = "cancel", target: str = "", ago: timedelta | None = None) -> None:
    at = timezone.now() - (ago or timedelta())
    AuditEntry.objects.bulk_create(
        AuditEntry(
            at=at,
            username="ada",
            source="admin",
            action=action,
            target=target or str(uuid.uuid4()),
        )
        for _ in range(n)
    )


def test_the_audit_log_list_never_counts_or_scans_the_whole_log(
    superuser_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 500,000 entries each page counted them all, listed the days with a DISTINCT over
    `DATE_TRUNC('day', at)` (130-190 ms) and the actions with a DISTINCT; its search was
    UPPER(target) = UPPER(...), which no index holds."""
    monkeypatch.setattr("jobs.selectors.EXACT_COUNT_LIMIT", 3)
    log(5)
    log(1, action="webhook_delete", target="webhook 7")
    urls = [
        AUDIT,
        f"{AUDIT}?action__exact=cancel",
        f"{AUDIT}?period=24h",
        f"{AUDIT}?q=webhook+7",
        f"{AUDIT}?source__exact=admin",
    ]
    for url in urls:
        over_log = [
            sql.upper() for sql in sql_of(superuser_client, url) if "AUDIT_LOG" in sql.upper()
        ]
        assert [sql for sql in over_log if "COUNT(" in sql and "LIMIT 4" not in sql] == [], url
        assert [sql for sql in over_log if "DISTINCT" in sql or "DATE_TRUNC" in sql] == [], url
        assert [sql for sql in over_log if "UPPER(" in sql] == [], url


def test_the_audit_log_filters_by_fixed_choices_and_searches_an_exact_target(
    superuser_client: Client,
) -> None:
    log(2, action="cancel")
    log(1, action="webhook_delete", target="webhook 7")
    log(1, action="purge", ago=timedelta(days=3))

    def listed(query: str) -> list[tuple[str, str]]:
        response = superuser_client.get(AUDIT + query)
        assert response.status_code == 200, query
        return [(entry.action, entry.target) for entry in response.context["cl"].result_list]

    page = superuser_client.get(AUDIT).content.decode()
    for action in audit.ACTIONS:  # all of them, whether logged yet or not
        assert f"?action__exact={action}" in page, action
    assert [a for a, _ in listed("?action__exact=cancel")] == ["cancel", "cancel"]
    assert listed("?q=webhook+7") == [("webhook_delete", "webhook 7")]
    assert listed("?q=WEBHOOK+7") == []
    assert {a for a, _ in listed("?period=24h")} == {"cancel", "webhook_delete"}
    assert [a for a, _ in listed("?period=7d") if a == "purge"] == ["purge"]
    for bad in ("?action__exact=nothing", "?period=forever"):
        refused = superuser_client.get(AUDIT + bad)
        assert (refused.status_code, refused.get("Location")) == (302, AUDIT + "?e=1"), bad


def test_the_audit_log_sorts_by_time_only(superuser_client: Client) -> None:
    """Sorted by another column (`?o=1,2,3,6`), a page sorted all 500,000 entries: 420-503 ms."""
    now = timezone.now()
    # Newest first; in every other column the newest entry comes second, the oldest first.
    for minutes, (username, source, address, action, target, count) in enumerate(
        [
            ("bob", "api", "10.0.0.2", "create", "b", 2),
            ("cy", "console", "10.0.0.3", "purge", "c", 3),
            ("ada", "admin", "10.0.0.1", "cancel", "a", 1),
        ]
    ):
        AuditEntry.objects.create(
            at=now - timedelta(minutes=minutes),
            username=username,
            source=source,
            address=address,
            action=action,
            target=target,
            count=count,
        )

    def usernames(query: str) -> list[str]:
        response = superuser_client.get(AUDIT + query)
        assert response.status_code == 200, query
        return [entry.username for entry in response.context["cl"].result_list]

    assert usernames("") == ["bob", "cy", "ada"]
    assert usernames("?o=-0") == ["bob", "cy", "ada"]
    assert usernames("?o=0") == ["ada", "cy", "bob"]
    for column in range(1, 7):
        for order in (f"{column}", f"-{column}"):
            assert usernames(f"?o={order}") == ["bob", "cy", "ada"], order
    assert usernames("?o=1.2.3.6") == ["bob", "cy", "ada"]
    page = superuser_client.get(AUDIT).content.decode()
    assert 'class="sortable column-at' in page
    for fixed in ("username", "source", "address", "action", "target", "count"):
        assert f'class="column-{fixed}"' in page, fixed


@pytest.mark.django_db  # in one transaction: ANALYZE's statistics stay as taken until its end
def test_a_rare_action_or_source_is_listed_without_reading_the_whole_log(
    superuser_client: Client,
) -> None:
    """At 500,000 entries the admin's filter by a rare action (`queue_pause`, `token_revoke`)
    took 349-372 ms and by a rare source 552 ms, the console's 461 ms: each walked the log
    from its newest entry, stepping over every other one."""
    for n in range(3):
        AuditEntry.objects.create(
            at=timezone.now() - timedelta(days=30, minutes=n),
            username="ada",
            source="console",
            action="queue_pause",
            target="queue emails",
        )
    execute(
        """
        INSERT INTO audit_log (at, username, source, address, action, target, count, summary)
        SELECT now() - n * interval '1 s', 'api-client', 'api', '', 'create',
               gen_random_uuid()::text, 1, ''
        FROM generate_series(1, 20000) AS n
        """
    )
    execute("ANALYZE audit_log")

    for url, shown in [
        (f"{AUDIT}?action__exact=queue_pause", 3),
        (f"{AUDIT}?source__exact=console", 3),
        (f"{AUDIT}?source__exact=worker", 0),
        ("/audit?action=queue_pause", 3),
        ("/audit?source=console", 3),
    ]:
        context = superuser_client.get(url).context
        entries = context["cl"].result_list if "cl" in context else context["entries"]
        assert len(entries) == shown, url
        # The page's entries, and as many for its count.
        assert rows_read(superuser_client, url, "audit_log") <= 2 * (shown + 1), url
