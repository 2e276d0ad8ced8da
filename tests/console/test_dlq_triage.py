"""DLQ triage and bulk actions: dead letters grouped by error signature, a group retried or
purged in one action, search, edit-and-retry, and "retry / cancel / purge all N matching"
running as a job of its own in bounded batches."""

from __future__ import annotations

import json
import re
import uuid
import zoneinfo
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from jobs import bulk, queues, state
from jobs.models import AuditEntry, Job, JobStatus, UserPreference
from jobs.sql import query

from .helpers import completed, dead_letter

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("type", "error_type", "message", "signature"),
    [
        ("noop", "KeyError", "'user_42' not found", "noop · KeyError: ? not found"),
        (
            "http_request",
            "HTTPError",
            'HTTP 503 from /jobs/3f7a1c2d-0000-4000-8000-00000000abcd after 1.5 s for "eu"',
            "http_request · HTTPError: HTTP N from /jobs/<id> after N s for ?",
        ),
        (
            "flaky",
            "OSError",
            "object 0xdeadbeef12  at\nline 7",
            "flaky · OSError: object <id> at line N",
        ),
        ("flaky", None, None, "flaky · Error:"),
    ],
)
def test_the_signature_masks_what_varies_between_occurrences(
    type: str, error_type: str | None, message: str | None, signature: str
) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT scheduler_error_signature(%s, %s, %s)", [type, error_type, message])
        assert cursor.fetchone() == (signature,)


def test_the_dlq_groups_dead_letters_by_signature_and_narrows_to_one_or_a_search(
    as_operator: Client,
) -> None:
    for n in (1, 2, 3):
        dead_letter("flaky", error=f"timeout after {n * 10} s on 'shard-{n}'")
    other = dead_letter("noop", error="bad input")

    page = as_operator.get("/dlq")
    groups = [(g.signature, g.count) for g, _ in page.context["groups"]]
    assert groups == [
        ("flaky · HandlerFailure: timeout after N s on ?", 3),
        ("noop · HandlerFailure: bad input", 1),
    ]
    first = page.context["groups"][0][0]
    assert first.per_day[-1] == 3 and first.first_seen <= first.last_seen
    assert "<polyline" in page.content.decode()  # the sparkline

    narrowed = as_operator.get("/dlq", {"signature": "noop · HandlerFailure: bad input"})
    assert [str(j.id) for j in narrowed.context["jobs"]] == [other["id"]]
    searched = as_operator.get("/dlq", {"q": "shard"})
    assert len(searched.context["jobs"]) == 3
    assert len(as_operator.get("/dlq", {"q": other["id"]}).context["jobs"]) == 1
    # A search that finds nothing says so, not that the DLQ, which holds four, is empty.
    nothing = as_operator.get("/dlq", {"q": "no such error"}).content.decode()
    assert "No dead letter matches." in nothing
    assert "The dead-letter queue is empty" not in nothing


def test_a_groups_days_are_the_viewers_days_whatever_the_zones_offset(
    as_operator: Client, operator: Any
) -> None:
    # Kathmandu is 5:45 ahead of UTC: its midnight is no whole hour of UTC.
    UserPreference.objects.create(user=operator, time_zone="Asia/Kathmandu")
    zone = zoneinfo.ZoneInfo("Asia/Kathmandu")
    now = timezone.now()
    midnight = datetime.combine(now.astimezone(zone).date(), datetime.min.time(), tzinfo=zone)
    before, after = midnight - timedelta(minutes=1), min(now, midnight + timedelta(minutes=1))
    ids = [dead_letter("flaky", error="late")["id"] for _ in range(2)]
    for job_id, at in zip(ids, (before, after), strict=True):
        # Moved in time as a later change to a dead letter would move it: counted again.
        Job.objects.filter(id=job_id).update(updated_at=at)

    (group, _), *_ = as_operator.get("/dlq").context["groups"]
    assert (group.count, group.first_seen, group.last_seen) == (2, before, after)
    assert group.per_day[-2:] == [1, 1]  # one on each side of the viewer's midnight
    assert sum(group.per_day) == 2


def test_the_dlq_pages_count_their_groups_and_failures_without_reading_jobs_or_attempts() -> None:
    dead_letter("flaky", error="late")
    for name in ("dlq_by_type", "dlq_by_error", "dlq_by_signature", "dlq_signature_days"):
        params = {"limit": 5, "signatures": [], "unsigned": True, "time_zone": "UTC"}
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (FORMAT JSON) " + query(name), {**params, "since": "today"})
            (plan,) = cursor.fetchone()
        assert relations(plan[0]["Plan"]) == {"dlq_counts"}, name
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (FORMAT JSON) " + query("failures_per_hour"),
            {"time_zone": "UTC", "since": "today"},
        )
        (plan,) = cursor.fetchone()
    assert relations(plan[0]["Plan"]) == {"failure_counts"}


def relations(node: dict[str, Any]) -> set[str]:
    named = {node["Relation Name"]} if "Relation Name" in node else set()
    return named.union(*(relations(child) for child in node.get("Plans", [])))


def test_a_group_is_retried_in_one_action_run_as_a_job_in_batches(
    as_operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = [dead_letter("flaky", error=f"timeout after {n} s") for n in range(5)]
    dead_letter("noop", error="something else")
    signature = "flaky · HandlerFailure: timeout after N s"

    confirm = as_operator.get("/bulk/retry", {"scope": "dlq", "signature": signature})
    assert confirm.context["count"] == 5
    form = dict(confirm.context["hidden"])
    form.update(as_of=confirm.context["as_of"], confirmed="5")
    started = as_operator.post("/bulk/retry", form)
    runner = Job.objects.get(type=bulk.BULK_TYPE)
    assert started["Location"] == f"/jobs/{runner.id}"
    assert runner.payload["signature"] == signature

    monkeypatch.setattr(bulk, "BATCH", 2)
    progress: list[tuple[int, int, int]] = []
    result = bulk.run(runner.payload, lambda *p: progress.append(p), job_id=runner.id)

    assert result == {"matched": 5, "retried": 5}
    assert progress == [(2, 2, 5), (4, 4, 5), (5, 5, 5)]
    assert all(Job.objects.get(id=job["id"]).status == JobStatus.PENDING for job in group)
    assert Job.objects.filter(in_dlq=True).count() == 1  # the other group stays
    # Run again (a crash and a retry of the bulk job): nothing matches any more.
    assert bulk.run(runner.payload, lambda *p: None, job_id=runner.id) == {
        "matched": 0,
        "retried": 0,
    }
    entry = AuditEntry.objects.get(action="bulk")
    assert (entry.count, entry.target) == (5, str(runner.id))


def test_a_bulk_action_confirmed_from_a_browsers_form_runs(operator: Any) -> None:
    # A browser's form carries its CSRF token, which the test client's forms leave out: the
    # token was taken for a ledger filter, and every bulk job failed on it (an unknown
    # parameter), its value kept in the job's payload and the audit log.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    group = [dead_letter("flaky", error="timeout") for _ in range(2)]
    confirm = browser.get("/bulk/retry", {"scope": "dlq"}).content.decode()
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm))
    assert "csrfmiddlewaretoken" in form

    started = browser.post("/bulk/retry", form)
    # The same confirmation sent again (a double click) starts no second bulk job.
    assert browser.post("/bulk/retry", form)["Location"] == started["Location"]
    runner = Job.objects.get(type=bulk.BULK_TYPE)
    assert AuditEntry.objects.filter(action="bulk").count() == 1
    assert form["csrfmiddlewaretoken"] not in json.dumps(runner.payload)
    result = bulk.run(runner.payload, lambda *progress: None, job_id=runner.id)
    assert result == {"matched": 2, "retried": 2}
    assert {Job.objects.get(id=job["id"]).status for job in group} == {JobStatus.PENDING}


def test_a_long_bulk_action_hands_the_rest_to_a_new_bulk_job_and_keeps_counting(
    as_operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = [dead_letter("flaky", error="boom") for _ in range(5)]
    confirm = as_operator.get("/bulk/purge", {"scope": "dlq"})
    form = {**dict(confirm.context["hidden"]), "as_of": confirm.context["as_of"], "confirmed": "5"}
    as_operator.post("/bulk/purge", form)
    first = Job.objects.get(type=bulk.BULK_TYPE)
    monkeypatch.setattr(bulk, "BATCH", 2)
    # A clock that says the slice is over after each batch.
    ticks = iter(range(0, 10_000, 1_000))

    def run(job: Job) -> dict[str, Any]:
        return bulk.run(job.payload, lambda *p: None, job_id=job.id, clock=lambda: next(ticks))

    handed = run(first)
    second = Job.objects.get(id=handed["continued_in"])
    assert handed == {"matched": 2, "purged": 2, "continued_in": str(second.id)}
    assert second.payload["done"] == {"matched": 2, "changed": 2}
    # Run again (a crash before it completed): the rest is the continuation's.
    assert run(first) == {"continued_in": str(second.id)}
    third = Job.objects.get(id=run(second)["continued_in"])
    assert run(third) == {"matched": 5, "purged": 5}  # the totals of the whole action
    assert not Job.objects.filter(id__in=[j["id"] for j in group]).exists()
    assert Job.objects.filter(type=bulk.BULK_TYPE).count() == 3


def test_cancel_all_matching_takes_what_was_counted_and_nothing_that_came_later(
    as_operator: Client,
) -> None:
    for _ in range(3):
        state.enqueue("noop", {}, priority=3)
    state.enqueue("flaky", {}, priority=3)
    query = {"type": "noop", "status": "pending"}

    # An operator stopping a flood pauses its queue first: the action must not wait in it.
    queues.pause("default")
    confirm = as_operator.get("/bulk/cancel", query)
    assert confirm.context["count"] == 3
    form = {**dict(confirm.context["hidden"]), "as_of": confirm.context["as_of"], "confirmed": "3"}
    as_operator.post("/bulk/cancel", form)
    late = state.enqueue("noop", {}, priority=3)  # after the count: not the operator's intent

    runner = Job.objects.get(type=bulk.BULK_TYPE)
    assert 'class="pill pill-paused"' not in as_operator.get(f"/jobs/{runner.id}").content.decode()
    assert bulk.run(runner.payload, lambda *p: None, job_id=runner.id) == {
        "matched": 3,
        "cancelled": 3,
    }
    assert Job.objects.filter(type="noop", status=JobStatus.CANCELLED).count() == 3
    assert Job.objects.get(id=late["id"]).status == JobStatus.PENDING
    assert Job.objects.get(type="flaky").status == JobStatus.PENDING


def test_ledger_offers_bulk_actions_on_a_filtered_list(as_operator: Client) -> None:
    state.enqueue("noop", {}, priority=2)
    page = as_operator.get("/jobs", {"type": "noop"}).content.decode()
    assert "Cancel all 1 matching…" in page
    assert "Retry all 1 matching…" in page


@pytest.mark.parametrize(
    ("status", "offered"),
    [
        ("completed", []),
        ("pending", ["Cancel"]),
        ("dlq", ["Retry", "Purge"]),
        ("", ["Retry", "Cancel", "Purge"]),
    ],
)
def test_the_ledger_offers_only_the_bulk_actions_its_status_filter_allows(
    as_operator: Client, status: str, offered: list[str]
) -> None:
    # "Purge all 10001 matching…" on completed jobs led to "Purge all 0 matching jobs?".
    completed("noop")
    dead_letter("noop", {})
    state.enqueue("noop", {}, priority=2)
    page = as_operator.get("/jobs", {"type": "noop", "status": status}).content.decode()
    assert re.findall(r">(\w+) all (?:\d+ )?matching…<", page) == offered


def test_a_filter_the_ledger_does_not_know_is_refused_not_widened_to_every_job(
    as_operator: Client,
) -> None:
    # A stale bookmark or a typo (`created_at_after` for `created_after`): before, the ledger
    # ignored it, said "match these filters", and offered to cancel every job.
    state.enqueue("noop", {}, priority=2)
    query = {"type": "noop", "created_at_after": "2026-01-01T00:00"}
    ledger = as_operator.get("/jobs", query)
    assert ledger.context["errors"] == {"created_at_after": ["Unknown query parameter."]}
    assert list(ledger.context["jobs"]) == []
    page = ledger.content.decode()
    assert "1 parameter the ledger does not know" in page and ": created_at_after." in page
    assert "matching…" not in page
    confirm = as_operator.get("/bulk/cancel", query)
    assert confirm.status_code == 302
    assert Job.objects.get(type="noop").status == JobStatus.PENDING
    with pytest.raises(state.JobValidationError) as refused:
        bulk.count("cancel", bulk.Selection(query=query))
    assert refused.value.details == {"created_at_after": ["Unknown query parameter."]}


def payload_field(response: Any) -> str:
    """The payload field of a DLQ job's edit form: its text and the errors under it."""
    body = response.content.decode()
    return body[body.index('id="field-payload"') :].split('<div class="field')[0]


def test_a_dead_letters_payload_is_edited_validated_and_retried(as_operator: Client) -> None:
    job = dead_letter("send_email", {"to": "a@example.com", "subject": "hi"})
    stored = payload_field(as_operator.get(f"/dlq/{job['id']}"))
    assert "&quot;to&quot;: &quot;a@example.com&quot;" in stored

    # A refused edit is shown next to the payload, as the operator typed it (it was thrown
    # away: a redirect to the page with the old payload and the errors in a banner).
    refused = as_operator.post(f"/dlq/{job['id']}/edit", {"payload": '{"subject": "no to"}'})
    assert refused.status_code == 400
    field = payload_field(refused)
    assert "payload.to: This field is required." in field
    assert "{&quot;subject&quot;: &quot;no to&quot;}</textarea>" in field
    assert Job.objects.get(id=job["id"]).in_dlq  # a payload the schema refuses changes nothing
    not_json = as_operator.post(f"/dlq/{job['id']}/edit", {"payload": '{"to": "b@example.com",'})
    assert not_json.status_code == 400
    field = payload_field(not_json)
    assert "Not valid JSON: Expecting property name enclosed in double quotes" in field
    assert "{&quot;to&quot;: &quot;b@example.com&quot;,</textarea>" in field
    as_operator.post(
        f"/dlq/{job['id']}/edit", {"payload": '{"to": "b@example.com", "subject": "hi"}'}
    )

    stored = Job.objects.get(id=job["id"])
    assert (stored.status, stored.payload["to"]) == (JobStatus.PENDING, "b@example.com")
    edit = AuditEntry.objects.get(action="edit")
    assert edit.before == {"payload": {"to": "a@example.com", "subject": "hi"}}
    assert edit.after == {"payload": {"to": "b@example.com", "subject": "hi"}}
    with pytest.raises(state.InvalidStateError):
        state.retry_with_payload(uuid.UUID(job["id"]), {"to": "c@example.com", "subject": "x"})


def test_a_dead_letter_whose_type_this_process_does_not_know_is_edited_and_retried(
    as_operator: Client,
) -> None:
    # Its handler gone in a deploy, or a Django task whose module this process has not
    # imported yet: as a plain retry, the edit is taken, checked only for what every
    # payload must be.
    job = dead_letter("noop", {})
    Job.objects.filter(id=job["id"]).update(type="removed_in_a_deploy")
    refused = as_operator.post(f"/dlq/{job['id']}/edit", {"payload": '["not", "an object"]'})
    assert refused.status_code == 400
    field = payload_field(refused)
    assert "Must be a JSON object." in field and "[&quot;not&quot;, &quot;an object&quot;]" in field
    assert Job.objects.get(id=job["id"]).in_dlq
    taken = as_operator.post(f"/dlq/{job['id']}/edit", {"payload": '{"to": "ops"}'})
    assert taken.status_code == 302
    stored = Job.objects.get(id=job["id"])
    assert (stored.status, stored.payload) == (JobStatus.PENDING, {"to": "ops"})
