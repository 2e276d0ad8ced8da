"""The admin's pages cost a bounded number of queries, none of them over a whole table,
however many rows a job or the audit log has."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import audit, queues, state
from jobs.models import AuditEntry, Job

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/admin/jobs/job/"
AUDIT = "/admin/jobs/auditentry/"


def sql_of(client: Client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [query["sql"] for query in captured]


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
