"""The Django admin as a superuser and as a staff user who may only look."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import state
from jobs.api.auth import issue_token
from jobs.models import (
    ApiToken,
    AuditEntry,
    Job,
    JobAttempt,
    JobLog,
    JobStatus,
    Schedule,
    Webhook,
    Worker,
)
from tests.attempts import fail_attempt

from .test_pages import analyze_jobs

# Transactional: the claim compares run_at with now(), which a test transaction would freeze.
pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/admin/jobs/job/"
DLQ = "/admin/jobs/deadletterjob/"


@pytest.fixture
def looker_client() -> Client:
    user = get_user_model().objects.create_user("looker", password="pw-looker", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="node-1", pid=4242, started_at=now, heartbeat_at=now)


def to_dlq(worker: Worker, job_type: str = "noop", error: str = "boom") -> Job:
    job = state.enqueue(job_type, {}, priority=2, max_retries=1)
    (claimed,) = state.claim(worker.id, 1, [uuid.UUID(job["id"])])
    state.append_logs(
        claimed.id, claimed.attempt_id, [(timezone.now(), "ERROR", f"about to fail: {error}")]
    )
    fail_attempt(
        claimed.id,
        claimed.attempt_id,
        error_type="RuntimeError",
        error_message=error,
        stack_trace=f'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: {error}',
        retry_delay=timedelta(seconds=5),
    )
    return Job.objects.get(id=job["id"])


def action(client: Client, url: str, name: str, objects: list[Any], **extra: str) -> Any:
    data = {"action": name, "_selected_action": [str(o.pk) for o in objects], **extra}
    return client.post(url, data, follow=False)


def hidden_fields(page: str) -> dict[str, list[str]]:
    """The hidden inputs of a page's POST form, its CSRF token among them."""
    fields: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page):
        fields.setdefault(name, []).append(value)
    return fields


def ticked(admin_browser: Client, url: str, name: str, objects: list[Any]) -> Callable[[], Any]:
    """Run the action `name` on `objects` as ticked on the page at `url` (and left open)."""
    form = hidden_fields(admin_browser.get(url).content.decode())
    return lambda: admin_browser.post(
        url,
        {
            **form,
            "action": name,
            "index": "0",
            "_selected_action": [str(o.pk) for o in objects],
        },
    )


def notes(admin_browser: Client, url: str) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in admin_browser.get(url).context["messages"]]


# --- the jobs list and a job's page --------------------------------------------------------------


def test_job_list_filters_and_search(superuser_client: Client, worker: Worker) -> None:
    dead = to_dlq(worker, "flaky")
    urgent = Job.objects.get(id=state.enqueue("noop", {}, priority=1)["id"])
    relaxed = Job.objects.get(id=state.enqueue("send_email", {"to": "a@b.c", "subject": "s"})["id"])

    def listed(query: str) -> set[uuid.UUID]:
        response = superuser_client.get(JOBS + query)
        assert response.status_code == 200
        return {job.id for job in response.context["cl"].result_list}

    assert listed("") == {dead.id, urgent.id, relaxed.id}
    assert listed("?status__exact=failed") == {dead.id}
    assert listed("?in_dlq__exact=1") == {dead.id}
    assert listed("?priority__exact=1") == {urgent.id}
    assert listed("?type=send_email") == {relaxed.id}
    assert listed(f"?q={urgent.id}") == {urgent.id}
    assert listed("?q=send_") == {relaxed.id}
    assert listed("?q=not-a-uuid-nor-a-type") == set()

    # A priority that cannot be is the admin's "?e=1" (the list unfiltered, with a note),
    # as a value its own filters cannot read is; one that was no number was a 500.
    for bad in ("?priority__exact=abc", "?priority__exact=7"):
        refused = superuser_client.get(JOBS + bad)
        assert (refused.status_code, refused.get("Location")) == (302, JOBS + "?e=1"), bad

    page = superuser_client.get(JOBS).content.decode()
    assert "Failed · in the dead-letter queue" in page
    assert "Add job" not in page


def test_the_job_lists_never_count_or_scan_every_job(
    superuser_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a million jobs a COUNT(*) per page took ~600 ms and the priority filter's DISTINCT
    ~260 ms: the change lists count at most EXACT_COUNT_LIMIT + 1 rows (then estimate) and
    list fixed filter choices."""
    monkeypatch.setattr("jobs.selectors.EXACT_COUNT_LIMIT", 3)
    for n in range(5):
        state.enqueue("noop", {"n": n}, priority=2)
    for url in [JOBS, f"{JOBS}?status__exact=pending", f"{JOBS}?priority__exact=2", DLQ]:
        with CaptureQueriesContext(connection) as captured:
            response = superuser_client.get(url)
        assert response.status_code == 200, url
        over_jobs = [q["sql"].upper() for q in captured if 'FROM "JOBS"' in q["sql"].upper()]
        unbounded = [sql for sql in over_jobs if "COUNT(" in sql and "LIMIT 4" not in sql]
        assert unbounded == [], url
        assert [sql for sql in over_jobs if "DISTINCT" in sql] == [], url
    assert "noop" in superuser_client.get(JOBS).content.decode()


def listed_ids(page: str) -> list[str]:
    return re.findall(r'href="/admin/jobs/job/([0-9a-f-]{36})/change/', page)


def test_the_job_list_sorts_as_the_api_does_and_only_by_indexed_columns(
    superuser_client: Client, worker: Worker
) -> None:
    """Sorted by a column, ties go oldest first and the descending sort is the exact
    reverse, so that each sort reads its index in order (`jobs.filters.SORT_ORDERS`): with
    Django's own tie-break, a sort by priority over a month of history took 0.5 s a page.
    A column without such an index does not sort."""
    jobs = [
        state.enqueue("noop", {"n": n}, priority=priority)
        for n, priority in enumerate([2, 1, 2, 1])
    ]
    ascending = [
        job["id"] for job in sorted(jobs, key=lambda job: (job["priority"], job["created_at"]))
    ]
    # Columns counted from the action's checkbox (0), then the id (1).
    column = 2 + ["type", "queue", "status_label", "priority"].index("priority")
    assert listed_ids(superuser_client.get(f"{JOBS}?o={column}").content.decode()) == ascending
    page = superuser_client.get(f"{JOBS}?o=-{column}").content.decode()
    assert listed_ids(page) == ascending[::-1]
    for sortable in ("id", "priority", "scheduled_at", "created_at"):
        assert f'class="sortable column-{sortable}' in page, sortable
    for fixed in ("type", "queue", "status_label", "attempts", "worker"):
        assert f'class="column-{fixed}"' in page, fixed
    # Nor by hand: the type column asked for in the query string leaves the list as it is.
    by_type = superuser_client.get(f"{JOBS}?o=-2").content.decode()
    newest_first = [job["id"] for job in sorted(jobs, key=lambda job: job["created_at"])][::-1]
    assert listed_ids(by_type) == newest_first
    to_dlq(worker)
    dlq_page = superuser_client.get(DLQ).content.decode()
    assert 'class="sortable column-priority' in dlq_page
    assert 'class="column-attempts"' in dlq_page


def test_a_job_page_is_read_only_with_attempts_and_logs(
    superuser_client: Client, worker: Worker
) -> None:
    job = to_dlq(worker, error="disk full")

    response = superuser_client.get(f"{JOBS}{job.id}/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "disk full" in page  # the attempt's error and the job's last error
    assert "RuntimeError: disk full" in page  # the stack trace
    assert "about to fail: disk full" in page  # the log line
    assert 'name="status"' not in page and 'name="priority"' not in page
    assert 'name="_save"' not in page
    assert not response.context["adminform"].form.fields  # nothing editable at all
    for inline in response.context["inline_admin_formsets"]:
        assert not inline.has_add_permission and not inline.has_change_permission


def test_a_deeply_nested_payload_is_shown_truncated_on_a_small_page(
    superuser_client: Client,
) -> None:
    tree: list[Any] = ["bottom"]
    for _ in range(499):
        tree = [tree]
    # The API refuses such a payload now (jobs.limits), but a job stored before may hold one.
    job = state.enqueue("noop", {}, priority=2)
    Job.objects.filter(id=job["id"]).update(payload={"tree": tree})

    response = superuser_client.get(f"{JOBS}{job['id']}/change/")

    assert response.status_code == 200
    assert len(response.content) < 100_000  # 500 KB when pretty-printed in full
    raw = f'<a href="/jobs/{job["id"]}/payload.json" download>Download the raw JSON</a>'
    assert raw in response.content.decode()


def test_jobs_cannot_be_added_edited_or_deleted_in_the_admin(
    superuser_client: Client, worker: Worker
) -> None:
    job = to_dlq(worker)

    assert superuser_client.get(JOBS + "add/").status_code == 403
    edit = superuser_client.post(f"{JOBS}{job.id}/change/", {"status": "completed"})
    assert edit.status_code == 403
    assert superuser_client.post(f"{JOBS}{job.id}/delete/", {"post": "yes"}).status_code == 403
    listing = superuser_client.get(JOBS)
    # Not even Django's delete_selected: the one action goes through the state machine.
    offered = listing.context["action_form"].fields["action"].choices
    assert [name for name, _label in offered if name] == ["cancel_selected"]
    job.refresh_from_db()
    assert job.in_dlq and job.status == JobStatus.FAILED


# --- the dead-letter queue -----------------------------------------------------------------------


def test_dlq_lists_only_dead_letter_jobs_and_retry_selected_calls_the_state_machine(
    superuser_client: Client, worker: Worker
) -> None:
    first, second = to_dlq(worker), to_dlq(worker)
    alive = Job.objects.get(id=state.enqueue("noop", {})["id"])

    listing = superuser_client.get(DLQ)
    assert {j.id for j in listing.context["cl"].result_list} == {first.id, second.id}
    assert alive.id not in {j.id for j in listing.context["cl"].result_list}

    response = action(superuser_client, DLQ, "retry_selected", [first, alive])

    assert response.status_code == 302
    first.refresh_from_db()
    assert (first.status, first.in_dlq, first.attempt_count) == (JobStatus.PENDING, False, 0)
    assert JobAttempt.objects.filter(job=first).count() == 1  # history kept
    second.refresh_from_db()
    assert second.in_dlq  # not selected, not touched
    followed = superuser_client.get(DLQ)
    notes = [str(m) for m in followed.context["messages"]]
    assert any("Retried 1 job" in note for note in notes)
    assert {j.id for j in followed.context["cl"].result_list} == {second.id}


def test_retry_selected_of_jobs_retried_meanwhile_elsewhere_warns_and_claims_no_retry(
    admin_browser: Client, worker: Worker
) -> None:
    """The list is filtered to the DLQ, so jobs that left it after they were ticked were
    not in the action's queryset: "Retried 0 job(s)", in green, and no warning."""
    stale, kept = to_dlq(worker), to_dlq(worker)
    retry_stale = ticked(admin_browser, DLQ, "retry_selected", [stale])
    retry_both = ticked(admin_browser, DLQ, "retry_selected", [stale, kept])
    state.retry_many_from_dlq([stale.id])  # another operator, on another page

    assert retry_stale().status_code == 302
    assert notes(admin_browser, DLQ) == [
        (
            "warning",
            "The 1 selected job(s) had already left the DLQ (retried or purged "
            "elsewhere): none was retried.",
        ),
    ]
    assert retry_both().status_code == 302
    assert notes(admin_browser, DLQ) == [
        ("success", "Retried 1 job(s): back to pending with fresh attempts, due now."),
        (
            "warning",
            "1 of the 2 selected job(s) had already left the DLQ (retried or purged "
            "elsewhere): not retried.",
        ),
    ]
    assert not Job.objects.get(id=kept.id).in_dlq


def test_purge_selected_of_jobs_retried_meanwhile_elsewhere_asks_nothing_of_them(
    admin_browser: Client, worker: Worker
) -> None:
    """Jobs that had left the DLQ since they were ticked were asked about as "Purge 0
    jobs?", with a "Yes, purge 0 jobs" button."""
    gone, stays, late = to_dlq(worker), to_dlq(worker), to_dlq(worker)
    purge_gone = ticked(admin_browser, DLQ, "purge_selected", [gone])
    purge_all = ticked(admin_browser, DLQ, "purge_selected", [gone, stays, late])
    state.retry_many_from_dlq([gone.id])

    refused = purge_gone()
    assert (refused.status_code, refused["Location"]) == (302, DLQ)
    assert notes(admin_browser, DLQ) == [
        (
            "warning",
            "The 1 selected job(s) had already left the DLQ (retried or purged "
            "elsewhere): none was purged.",
        ),
    ]

    confirm = purge_all()
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Yes, purge 2 jobs" in page
    assert "1 of the 3 selected jobs had already left the DLQ" in page
    assert str(gone.id) not in page
    state.retry_many_from_dlq([late.id])  # while the confirmation is open
    done = admin_browser.post(DLQ, hidden_fields(page))
    assert done.status_code == 302
    assert notes(admin_browser, DLQ) == [
        ("success", "Purged 1 job(s) with their attempts and logs."),
        (
            "warning",
            "1 of the 2 selected job(s) had already left the DLQ (retried or purged "
            "elsewhere): not purged.",
        ),
    ]
    assert not Job.objects.filter(id=stays.id).exists()
    assert Job.objects.filter(id__in=[gone.id, late.id], in_dlq=False).count() == 2


def test_purge_selected_asks_first_then_purges_and_cancels_dependents(
    superuser_client: Client, worker: Worker
) -> None:
    doomed, kept = to_dlq(worker, error="poison"), to_dlq(worker)
    waiting = state.enqueue("noop", {}, depends_on=doomed.id)

    confirm = action(superuser_client, DLQ, "purge_selected", [doomed])

    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Purge dead-letter jobs?" in page
    assert str(doomed.id) in page and "poison" in page
    assert "1 job waiting on it will be cancelled" in page
    assert Job.objects.filter(id=doomed.id).exists()  # nothing happens before the yes

    done = action(superuser_client, DLQ, "purge_selected", [doomed], post="yes")

    assert done.status_code == 302
    assert not Job.objects.filter(id=doomed.id).exists()
    assert not JobAttempt.objects.filter(job_id=doomed.id).exists()
    assert not JobLog.objects.filter(job_id=doomed.id).exists()
    assert Job.objects.get(id=waiting["id"]).status == JobStatus.CANCELLED
    assert Job.objects.filter(id=kept.id, in_dlq=True).exists()


def test_purge_of_everything_matching_a_filter(superuser_client: Client, worker: Worker) -> None:
    flaky = [to_dlq(worker, "flaky") for _ in range(3)]
    other = to_dlq(worker, "noop")

    confirm = action(
        superuser_client, DLQ + "?type=flaky", "purge_selected", flaky[:1], select_across="1"
    )
    page = confirm.content.decode()
    assert "Yes, purge 3 jobs" in page
    # The "yes" names the jobs the page counted, each of them.
    assert sorted(hidden_fields(page)["_selected_action"]) == sorted(str(j.id) for j in flaky)
    superuser_client.post(DLQ + "?type=flaky", hidden_fields(page))

    assert list(Job.objects.values_list("id", flat=True)) == [other.id]


# --- a staff user who may only look --------------------------------------------------------------


def test_a_view_only_staff_user_sees_jobs_and_the_dlq_but_cannot_act(
    looker_client: Client, worker: Worker
) -> None:
    dead = to_dlq(worker)

    assert looker_client.get(JOBS).status_code == 200
    job_page = looker_client.get(f"{JOBS}{dead.id}/change/")
    assert job_page.status_code == 200
    assert "boom" in job_page.content.decode()  # attempts inline visible
    listing = looker_client.get(DLQ)
    assert listing.status_code == 200
    assert [j.id for j in listing.context["cl"].result_list] == [dead.id]
    assert listing.context["action_form"] is None or not [
        choice
        for choice, _ in listing.context["action_form"].fields["action"].choices
        if choice in ("retry_selected", "purge_selected")
    ]

    action(looker_client, DLQ, "retry_selected", [dead])
    action(looker_client, DLQ, "purge_selected", [dead], post="yes")

    dead.refresh_from_db()
    assert dead.in_dlq and dead.status == JobStatus.FAILED
    assert looker_client.get("/admin/jobs/webhook/").status_code == 403
    assert looker_client.get(JOBS + "add/").status_code == 403


def test_an_operator_with_change_but_not_delete_may_retry_but_not_purge(worker: Worker) -> None:
    user = get_user_model().objects.create_user("half", password="pw-half", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_job"))
    client = Client()
    client.force_login(user)
    first, second = to_dlq(worker), to_dlq(worker)

    choices = dict(client.get(DLQ).context["action_form"].fields["action"].choices)
    assert "retry_selected" in choices and "purge_selected" not in choices
    action(client, DLQ, "purge_selected", [first], post="yes")
    action(client, DLQ, "retry_selected", [second])

    assert Job.objects.get(id=first.id).in_dlq
    assert Job.objects.get(id=second.id).status == JobStatus.PENDING


# --- workers, webhooks, tokens -----------------------------------------------------------------


def test_workers_are_read_only_and_a_stale_one_is_flagged(superuser_client: Client) -> None:
    long_ago = timezone.now() - timedelta(hours=1)
    Worker.objects.create(hostname="ghost", pid=7, started_at=long_ago, heartbeat_at=long_ago)

    page = superuser_client.get("/admin/jobs/worker/").content.decode()

    assert "ghost" in page and "stale" in page
    assert superuser_client.get("/admin/jobs/worker/add/").status_code == 403
    ghost = Worker.objects.get(hostname="ghost")
    edit = superuser_client.post(f"/admin/jobs/worker/{ghost.pk}/change/", {"pid": "8"})
    assert edit.status_code == 403
    gone = superuser_client.post(f"/admin/jobs/worker/{ghost.pk}/delete/", {"post": "yes"})
    assert gone.status_code == 403
    assert Worker.objects.get(hostname="ghost").pid == 7


def test_webhooks_are_managed_with_validation_a_hidden_secret_and_a_test_action(
    superuser_client: Client,
) -> None:
    bad = superuser_client.post(
        "/admin/jobs/webhook/add/",
        {"url": "ftp://example.com", "event_types": ["job.failed"], "secret": ""},
    )
    assert bad.status_code == 200
    assert set(bad.context["adminform"].form.errors) == {"url", "secret"}
    assert not Webhook.objects.exists()

    created = superuser_client.post(
        "/admin/jobs/webhook/add/",
        {
            "url": "https://example.com/hook",
            "event_types": ["job.failed", "job.dlq_entry"],
            "secret": "hunter2-hunter2",
            "is_active": "on",
        },
    )
    assert created.status_code == 302
    hook = Webhook.objects.get()
    assert hook.event_types == ["job.failed", "job.dlq_entry"]
    assert hook.secret == "hunter2-hunter2"
    assert hook.created_by is not None and hook.created_by.username == "root"

    change_page = superuser_client.get(f"/admin/jobs/webhook/{hook.id}/change/").content.decode()
    assert "hunter2" not in change_page
    superuser_client.post(
        f"/admin/jobs/webhook/{hook.id}/change/",
        {"url": "https://example.com/v2", "event_types": ["job.failed"], "secret": ""},
    )
    hook.refresh_from_db()
    assert (hook.url, hook.secret, hook.is_active) == (
        "https://example.com/v2",
        "hunter2-hunter2",
        False,
    )

    action(superuser_client, "/admin/jobs/webhook/", "send_test_delivery", [hook])
    delivery = Job.objects.get(type="http_request")
    assert delivery.payload["url"] == "https://example.com/v2"
    assert delivery.payload["headers"]["X-Scheduler-Event"] == "webhook.test"


def test_api_tokens_never_show_their_hash(superuser_client: Client) -> None:
    user = get_user_model().objects.get(username="root")
    issue_token(user)
    token = user.api_tokens.get()

    listing = superuser_client.get("/admin/jobs/apitoken/").content.decode()
    detail = superuser_client.get(f"/admin/jobs/apitoken/{token.pk}/change/").content.decode()

    assert token.prefix in listing
    assert token.key_hash not in listing and token.key_hash not in detail
    assert superuser_client.get("/admin/jobs/apitoken/add/").status_code == 403


TOKENS = "/admin/jobs/apitoken/"


def test_an_api_token_is_revoked_by_deleting_it_back_to_the_list_and_audited(
    admin_browser: Client,
) -> None:
    """Deleting a token sent the operator to the admin's index (Django's answer to a user
    who may not change the model) and left no audit entry."""
    user = get_user_model().objects.create_user("bob", password="pw-bob")
    secret = issue_token(user)
    token = user.api_tokens.get()
    page = f"{TOKENS}{token.pk}/delete/"

    revoke = admin_browser.post(page, hidden_fields(admin_browser.get(page).content.decode()))

    assert (revoke.status_code, revoke["Location"]) == (302, TOKENS)
    assert not user.api_tokens.exists()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.username, entry.source, entry.target) == (
        "token_revoke",
        "ada",
        "admin",
        "api token of bob",
    )
    assert entry.before["prefix"] == token.prefix and entry.before["user"] == "bob"
    written = str([entry.target, entry.summary, entry.before, entry.after])
    assert secret not in written and token.key_hash not in written


def test_api_tokens_revoked_together_are_each_audited(admin_browser: Client) -> None:
    user = get_user_model().objects.create_user("bob", password="pw-bob")
    issue_token(user)
    issue_token(user)
    tokens = list(ApiToken.objects.all())
    revoke = ticked(admin_browser, TOKENS, "delete_selected", tokens)

    confirm = revoke()
    assert confirm.status_code == 200
    done = admin_browser.post(TOKENS, hidden_fields(confirm.content.decode()))

    assert (done.status_code, done["Location"]) == (302, TOKENS)
    assert not ApiToken.objects.exists()
    revoked = AuditEntry.objects.filter(action="token_revoke")
    assert sorted((e.target, e.before["prefix"]) for e in revoked) == sorted(
        ("api token of bob", t.prefix) for t in tokens
    )


def test_schedules_show_their_next_run_and_are_paused_and_resumed_by_actions(
    superuser_client: Client,
) -> None:
    run = state.enqueue("noop", {}, cron="0 6 * * *", timezone="America/New_York")
    schedule = Schedule.objects.get(id=run["schedule_id"])
    listing = superuser_client.get("/admin/jobs/schedule/").content.decode()
    assert "0 6 * * *" in listing and "America/New_York" in listing
    assert datetime.fromisoformat(run["scheduled_at"]).isoformat() in listing  # the next run

    action(superuser_client, "/admin/jobs/schedule/", "pause_selected", [schedule])
    schedule.refresh_from_db()
    assert schedule.paused
    assert Job.objects.get(id=run["id"]).status == JobStatus.CANCELLED
    action(superuser_client, "/admin/jobs/schedule/", "resume_selected", [schedule])
    schedule.refresh_from_db()
    assert not schedule.paused
    assert Job.objects.filter(schedule=schedule, status=JobStatus.PENDING).count() == 1


def test_an_estimated_count_in_the_admin_says_about(
    superuser_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the console's lists say it (BoundedCountPaginator): "5 jobs" was the planner's
    # estimate of 30, printed as exact.
    monkeypatch.setattr("jobs.selectors.EXACT_COUNT_LIMIT", 3)
    for _ in range(5):
        state.enqueue("noop", {}, priority=2)
    analyze_jobs()
    for _ in range(25):
        state.enqueue("noop", {}, priority=2, queue="reports")
    listed = superuser_client.get(JOBS).content.decode()
    assert re.search(r"about \d+ jobs\s", listed)
    exact = superuser_client.get(JOBS + "?type=send_email").content.decode()
    assert re.search(r"\s0 jobs\s", exact) and "about" not in exact


def test_the_webhook_admin_refuses_credentials_in_the_url_and_a_secret_typed_with_spaces(
    superuser_client: Client,
) -> None:
    refused = superuser_client.post(
        "/admin/jobs/webhook/add/",
        {
            "url": "https://ops:hunter2@example.com/hook",
            "event_types": ["job.failed"],
            "secret": " päd sec ",
            "is_active": "on",
        },
    )
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert "user name or password" in errors["url"][0]
    assert "begin or end with whitespace" in errors["secret"][0]
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "url", ["https://例え.テスト/café", "http://receiver:8080/hook", "https://hooks.example/a b"]
)
def test_the_admin_takes_and_refuses_webhook_urls_as_the_api_and_the_console_do(
    superuser_client: Client, url: str
) -> None:
    from jobs import webhooks

    refused = webhooks.validate(url, ["job.failed"], "hunter2-hunter2").get("url")
    response = superuser_client.post(
        "/admin/jobs/webhook/add/",
        {"url": url, "event_types": ["job.failed"], "secret": "hunter2-hunter2"},
    )
    if refused:
        assert response.status_code == 200
        assert response.context["adminform"].form.errors["url"] == refused
    else:
        assert response.status_code == 302, response.context["adminform"].form.errors
        assert Webhook.objects.get().url == url
