"""The console's bulk actions, and its lists other than the ledger, refuse a query parameter
given more than once, as the ledger does: Django hands a view the last of several values, so
`/bulk/cancel?status=pending&status=failed` counted and cancelled only the retrying jobs, and
`/bulk/purge?scope=dlq&signature=...&scope=` purged every dead letter instead of one group.
A bulk action refused says why and changes no job; a list says why and lists nothing."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from jobs import bulk, state
from jobs.models import AuditEntry, Job, JobStatus

from .helpers import dead_letter, failed_once, text

pytestmark = pytest.mark.django_db

REPEATED = "Given more than once: send one value."
HTMX = {"HX-Request": "true"}


def run_started_bulk_jobs() -> None:
    """Run every bulk job the requests started, as a worker would: the jobs it changes are
    the jobs the operator's request changed."""
    for runner in Job.objects.filter(type=bulk.BULK_TYPE):
        bulk.run(runner.payload, lambda *progress: None, job_id=runner.id)


def status_of(job: dict[str, Any]) -> tuple[str, bool]:
    stored = Job.objects.get(id=job["id"])
    return stored.status, stored.in_dlq


def test_a_bulk_cancel_of_two_statuses_is_refused_saying_why_and_cancels_nothing(
    as_operator: Client,
) -> None:
    pending = state.enqueue("noop", {}, priority=2)
    retrying = failed_once(max_retries=3)

    confirm = as_operator.get("/bulk/cancel?status=pending&status=failed")
    assert confirm.status_code == 302 and confirm["Location"] == "/jobs"
    assert f"Nothing was done: status: {REPEATED}" in text(as_operator.get("/jobs"))

    # A hand-made form, or one from a page older than this rule, acts on nothing either.
    as_of = timezone.now().isoformat()
    form = {"status": ["pending", "failed"], "as_of": as_of, "confirmed": "1"}
    posted = as_operator.post("/bulk/cancel", form, follow=True)
    assert f"Nothing was done: status: {REPEATED}" in text(posted)
    assert "Bulk cancel" not in text(posted)
    run_started_bulk_jobs()
    assert not Job.objects.filter(type=bulk.BULK_TYPE).exists()
    assert not AuditEntry.objects.filter(action="bulk").exists()
    assert status_of(pending) == (JobStatus.PENDING, False)
    assert status_of(retrying) == (JobStatus.FAILED, False)


def test_a_repeated_scope_is_refused_not_read_as_the_whole_dead_letter_queue(
    as_operator: Client,
) -> None:
    group = [dead_letter(error="smtp refused") for _ in range(2)]
    other = dead_letter(error="disk full")
    signature = "flaky · HandlerFailure: smtp refused"
    query = urlencode([("scope", "dlq"), ("signature", signature), ("scope", "")])

    confirm = as_operator.get(f"/bulk/purge?{query}", follow=True)
    body = text(confirm)
    assert f"Nothing was done: scope: {REPEATED}" in body
    assert "Purge all" not in body

    as_of = timezone.now().isoformat()
    form = {"scope": ["dlq", ""], "signature": signature, "as_of": as_of, "confirmed": "3"}
    posted = as_operator.post("/bulk/purge", form, follow=True)
    assert f"Nothing was done: scope: {REPEATED}" in text(posted)
    run_started_bulk_jobs()
    assert not Job.objects.filter(type=bulk.BULK_TYPE).exists()
    assert [status_of(job) for job in [*group, other]] == [(JobStatus.FAILED, True)] * 3


def test_a_bulk_post_with_a_repeated_moment_or_count_is_refused(as_operator: Client) -> None:
    dead = dead_letter()
    as_of = timezone.now().isoformat()
    for repeated, form in (
        ("as_of", {"scope": "dlq", "as_of": [as_of, as_of], "confirmed": "1"}),
        ("confirmed", {"scope": "dlq", "as_of": as_of, "confirmed": ["1", "5"]}),
    ):
        posted = as_operator.post("/bulk/retry", form)
        assert posted.status_code == 302 and posted["Location"] == "/dlq", repeated
        assert f"Nothing was done: {repeated}: {REPEATED}" in text(as_operator.get("/dlq"))
    run_started_bulk_jobs()
    assert not Job.objects.filter(type=bulk.BULK_TYPE).exists()
    assert status_of(dead) == (JobStatus.FAILED, True)


def test_a_bulk_post_with_a_filter_nothing_knows_starts_nothing(as_operator: Client) -> None:
    # Its confirmation page refuses it; a POST sent without that page started a bulk job
    # bound to fail on it, recorded in the audit log as started.
    job = state.enqueue("noop", {}, priority=2)
    form = {
        "type": "noop",
        "created_at_after": "2026-01-01T00:00",
        "as_of": timezone.now().isoformat(),
        "confirmed": "1",
    }
    posted = as_operator.post("/bulk/cancel", form, follow=True)
    assert "Nothing was done: created_at_after: Unknown query parameter." in text(posted)
    assert not Job.objects.filter(type=bulk.BULK_TYPE).exists()
    assert not AuditEntry.objects.filter(action="bulk").exists()
    assert status_of(job) == (JobStatus.PENDING, False)


def test_a_repeated_page_is_still_the_first_page_for_a_bulk_action(as_operator: Client) -> None:
    state.enqueue("noop", {}, priority=2)
    confirm = as_operator.get("/bulk/cancel?type=noop&page=1&page=2")
    assert confirm.status_code == 200 and confirm.context["count"] == 1
    assert REPEATED not in text(confirm)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("q=smtp&q=disk", "q"),
        (
            urlencode(
                [
                    ("signature", "flaky · HandlerFailure: smtp refused"),
                    ("signature", "flaky · HandlerFailure: disk full"),
                ]
            ),
            "signature",
        ),
        ("type=noop&type=flaky", "type"),
    ],
)
def test_the_dlq_lists_nothing_for_a_repeated_filter_and_says_why(
    as_operator: Client, query: str, named: str
) -> None:
    smtp = dead_letter(error="smtp refused")
    disk = dead_letter(error="disk full")
    body = text(as_operator.get(f"/dlq?{query}"))
    assert f"Nothing is listed: {named}: {REPEATED}" in body
    assert f'id="job-{smtp["id"]}"' not in body and f'id="job-{disk["id"]}"' not in body
    assert "matching…" not in body
    # Nor does it say what a list of nothing would: the DLQ holds two.
    assert "used every attempt" not in body and "The dead-letter queue is empty" not in body
    assert "Nothing is listed for this address" in body


def test_a_repeated_page_is_still_the_first_page_of_the_dlq(as_operator: Client) -> None:
    dead = dead_letter()
    body = text(as_operator.get("/dlq?page=2&page=2"))
    assert f'id="job-{dead["id"]}"' in body and REPEATED not in body


def test_retry_selected_with_a_repeated_all_is_refused_and_retries_nothing(
    as_operator: Client,
) -> None:
    # `all=&all=1` was read as `all=1`: the ticked job's confirmation was the whole DLQ's.
    picked = dead_letter()
    other = dead_letter()
    query = urlencode([("id", picked["id"]), ("all", ""), ("all", "1")])
    confirm = as_operator.get(f"/dlq/retry?{query}")
    assert confirm.status_code == 302 and confirm["Location"] == "/dlq"
    assert f"Nothing was done: all: {REPEATED}" in text(as_operator.get("/dlq"))

    form = {"id": picked["id"], "all": ["", "1"], "as_of": timezone.now().isoformat()}
    posted = as_operator.post("/dlq/retry", form, follow=True)
    assert f"Nothing was done: all: {REPEATED}" in text(posted)
    assert [status_of(picked), status_of(other)] == [(JobStatus.FAILED, True)] * 2


def test_retry_selected_still_takes_every_ticked_job(as_operator: Client) -> None:
    picked = [dead_letter() for _ in range(2)]
    dead_letter()
    confirm = as_operator.get("/dlq/retry", {"id": [job["id"] for job in picked]})
    assert confirm.status_code == 200 and confirm.context["count"] == 2
    posted = as_operator.post("/dlq/retry", {"id": [job["id"] for job in picked]}, follow=True)
    assert "2 job(s) back to pending." in text(posted)
    assert [status_of(job) for job in picked] == [(JobStatus.PENDING, False)] * 2


def test_emptying_the_dlq_with_a_repeated_moment_is_refused(as_operator: Client) -> None:
    dead = [dead_letter() for _ in range(2)]
    as_of = as_operator.get("/dlq/empty").context["as_of"]
    posted = as_operator.post("/dlq/empty", {"as_of": [as_of, as_of]}, follow=True)
    assert f"Nothing was done: as_of: {REPEATED}" in text(posted)
    assert [status_of(job) for job in dead] == [(JobStatus.FAILED, True)] * 2


def test_the_audit_log_lists_nothing_for_a_repeated_filter_and_says_why(
    as_operator: Client,
) -> None:
    job = state.enqueue("noop", {}, priority=2)
    as_operator.post(f"/jobs/{job['id']}/cancel")
    assert "No entry matches." not in text(as_operator.get("/audit?action=cancel"))

    body = text(as_operator.get("/audit?action=retry&action=cancel"))
    assert f"Nothing is listed: action: {REPEATED}" in body
    assert "No entry matches." in body


def test_a_ledger_row_with_a_repeated_filter_matches_nothing(as_viewer: Client) -> None:
    job = state.enqueue("noop", {}, priority=2)
    row = as_viewer.get(f"/jobs/{job['id']}/row?match=1&type=send_email&type=noop", headers=HTMX)
    assert row.status_code == 204 and row.content == b""
    assert (
        as_viewer.get(f"/jobs/{job['id']}/row?match=1&type=noop", headers=HTMX).status_code == 200
    )
