"""The console through Django's test client: what each role sees, what actions do, how
errors are shown, that preferences persist and secrets stay hidden."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from jobs import bulk, queues, state
from jobs.console.selectors import CURRENT_JOBS_SHOWN
from jobs.console.templatetags.console import when
from jobs.models import Job, JobStatus, Limit, UserPreference, Webhook, Worker
from jobs.registry import registry
from jobs.representation import short_id

from .helpers import completed, dead_letter, login, make_worker, start, text

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


# --- seeing ----------------------------------------------------------------------------------


def test_every_page_needs_a_login(client: Client) -> None:
    for path in ["/", "/jobs", "/jobs/new", "/dlq", "/settings", f"/jobs/{uuid.uuid4()}"]:
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith(f"/accounts/login/?next={path}")


def test_login_page_logs_a_user_in(client: Client, viewer: Any) -> None:
    page = client.get("/accounts/login/?next=/jobs")
    assert page.status_code == 200
    assert 'name="csrfmiddlewaretoken"' in text(page)
    response = client.post(
        "/accounts/login/",
        {"username": viewer.username, "password": "pw-" + viewer.username, "next": "/jobs"},
    )
    assert response.status_code == 302 and response["Location"] == "/jobs"
    wrong = client.post("/accounts/login/", {"username": viewer.username, "password": "nope"})
    assert "did not match" in text(wrong)


def test_every_page_renders_for_a_viewer_without_action_buttons(as_viewer: Client) -> None:
    dead = dead_letter(error="smtp refused")
    running = state.enqueue("noop", {}, priority=1)
    start(running["id"])
    pages = {
        "/": ["Dashboard", "Active jobs", "Dead-letter queue", "Workers", "Live log"],
        "/jobs": ["Jobs", short_id(dead["id"]), short_id(running["id"])],
        "/jobs/new": ["only operators can create jobs"],
        "/dlq": ["Dead-letter queue", "<svg", "smtp refused"],
        f"/dlq/{dead['id']}": ["Retry timeline", "Stack trace", "HandlerFailure: smtp refused"],
        f"/jobs/{running['id']}": ["Attempts", "Upstream", "Downstream", "Processing"],
        "/settings": ["Display preferences", "Running configuration", "Notification webhooks"],
    }
    for path, expected in pages.items():
        response = as_viewer.get(path)
        assert response.status_code == 200, path
        body = text(response)
        for snippet in expected:
            assert snippet in body, (path, snippet)
        for button in ("Retry now", "Purge…", ">Cancel</button>", "Create job", "Retry all…"):
            assert button not in body, (path, button)
        assert 'href="/jobs/new"' not in body


def test_jobs_created_in_the_same_minute_are_told_apart_by_their_short_ids(
    as_viewer: Client,
) -> None:
    # A job id is a UUIDv7: its first digits are its creation time, the same for every job
    # of the same minute; the short id shown is its random end.
    jobs = [state.enqueue("noop", {}, priority=2) for _ in range(3)]
    ledger = text(as_viewer.get("/jobs"))
    shown = dict(re.findall(r'href="/jobs/([0-9a-f-]{36})" title="[^"]*">([^<]+)</a>', ledger))
    assert len(set(shown.values())) == 3
    for job in jobs:
        assert job["id"].endswith(shown[job["id"]]) and len(shown[job["id"]]) == 8


def test_operator_sees_the_action_buttons(as_operator: Client) -> None:
    dead = dead_letter()
    pending = state.enqueue("noop", {}, priority=2)
    ledger = text(as_operator.get("/jobs"))
    assert f'hx-post="/jobs/{pending["id"]}/cancel"' in ledger
    assert f'hx-post="/jobs/{dead["id"]}/retry"' in ledger
    detail = text(as_operator.get(f"/dlq/{dead['id']}"))
    assert "Retry now" in detail and "Purge permanently" in detail
    assert 'href="/jobs/new"' in detail


def test_unknown_job_is_a_404_page_not_a_blank_one(as_viewer: Client) -> None:
    response = as_viewer.get(f"/jobs/{uuid.uuid4()}")
    assert response.status_code == 404
    assert "No such job" in text(response)


def test_errors_no_view_handled_are_pages_for_a_browser_and_envelopes_for_the_api(
    viewer: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A mistyped console address, a console page that failed: pages, not the API's JSON.
    settings.DEBUG = False
    browser = Client(raise_request_exception=False, HTTP_ACCEPT="text/html")
    browser.force_login(viewer)
    missing = browser.get("/jobz")
    assert (missing.status_code, missing["Content-Type"]) == (404, "text/html; charset=utf-8")
    assert "No such page" in text(missing) and 'href="/jobs"' in text(missing)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("SELECT secret FROM internals")

    monkeypatch.setattr("jobs.console.selectors.stat_cards", broken)
    failed = browser.get("/", HTTP_X_REQUEST_ID="req-console-500")
    assert (failed.status_code, failed["Content-Type"]) == (500, "text/html; charset=utf-8")
    assert "Something went wrong" in text(failed) and "req-console-500" in text(failed)
    assert "secret" not in text(failed)
    # Under /api/ the envelope stays, for any client.
    for path in ("/api/v1/nope", "/api/nope"):
        assert browser.get(path).json()["error"]["code"] == "not_found"


def test_a_form_over_the_body_limit_is_a_page_saying_nothing_was_saved(
    as_operator: Client, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    body = {"type": "noop", "payload": '{"note": "' + "x" * 4096 + '"}', "priority": "2"}
    response = as_operator.post("/jobs/new", body)
    assert response.status_code == 413
    assert "Nothing was saved" in text(response) and "2,048 bytes" in text(response)
    assert Job.objects.count() == 0


def test_job_detail_and_dlq_detail_lead_to_each_other(as_viewer: Client) -> None:
    dead = dead_letter()
    assert as_viewer.get(f"/jobs/{dead['id']}")["Location"] == f"/dlq/{dead['id']}"
    state.retry_from_dlq(uuid.UUID(dead["id"]))
    response = as_viewer.get(f"/dlq/{dead['id']}", follow=True)
    assert response.redirect_chain[-1][0] == f"/jobs/{dead['id']}"
    assert "not in the dead-letter queue: it is pending" in text(response)


def test_job_detail_shows_upstream_and_downstream(as_viewer: Client) -> None:
    upstream = state.enqueue("noop", {}, priority=2)
    downstream = state.enqueue("noop", {}, priority=2, depends_on=uuid.UUID(upstream["id"]))
    up_page = text(as_viewer.get(f"/jobs/{upstream['id']}"))
    assert f'href="/jobs/{downstream["id"]}"' in up_page
    down_page = text(as_viewer.get(f"/jobs/{downstream['id']}"))
    assert f'href="/jobs/{upstream["id"]}"' in down_page
    assert "Blocked" in down_page and "waiting for its upstream job" in down_page


def test_dashboard_shows_counts_dlq_insight_and_node_health(as_viewer: Client) -> None:
    dead_letter(type="flaky", error="upstream timeout")
    stale = make_worker(heartbeat_age=3600, hostname="stale-node")
    busy = make_worker(hostname="busy-node")
    Worker.objects.filter(id=busy.id).update(unhandled_types=["resize_image", "ocr"])
    running = state.enqueue("generate_report", {"report": "q3"}, priority=1)
    start(running["id"], busy)
    body = text(as_viewer.get("/"))
    assert re.search(r'data-stat="dlq">\s*1\s*<', body)
    assert re.search(r'data-stat="processing">\s*1\s*<', body)
    assert "upstream timeout" in body
    nodes = body[body.index('id="nodes"') :]
    stale_row = nodes[nodes.index("stale-node") :].split("</tr>")[0]
    assert "pill-stale" in stale_row
    busy_row = nodes[nodes.index("busy-node") :].split("</tr>")[0]
    assert "pill-running" in busy_row and short_id(running["id"]) in busy_row
    assert "No handler for resize_image, ocr<" in busy_row
    assert "No handler" not in stale_row
    assert stale.hostname in body


def test_a_worker_holding_many_jobs_shows_its_oldest_few_and_how_many_more(
    as_viewer: Client,
) -> None:
    """With prefetch a worker holds thousands of claimed jobs: the panel, refetched every
    few hundred milliseconds, listed them all (296 KB, 1-5 s a refresh at 2,300 held)."""
    busy = make_worker(hostname="busy-node")
    held = [state.enqueue("noop", {"n": n}) for n in range(CURRENT_JOBS_SHOWN + 3)]
    for job in held:
        start(job["id"], busy)
    body = text(as_viewer.get("/dashboard/nodes", **HTMX))
    row = body[body.index("busy-node") :].split("</tr>")[0]
    shown = [job for job in held if short_id(job["id"]) in row]
    # Claimed in one transaction, they share a start: the id breaks the tie (uuid7s made in
    # the same millisecond are not in the order they were made).
    oldest = sorted(held, key=lambda job: job["id"])[:CURRENT_JOBS_SHOWN]
    assert sorted(shown, key=lambda job: job["id"]) == oldest
    assert "and 3 more" in row


def test_dashboard_panels_render_as_fragments(as_viewer: Client) -> None:
    for part in ("active", "dlq", "nodes"):
        response = as_viewer.get(f"/dashboard/{part}", **HTMX)
        assert response.status_code == 200
        assert "<html" not in text(response)


# --- the ledger ------------------------------------------------------------------------------


def test_ledger_filters_orders_and_paginates_with_the_users_page_size(
    as_viewer: Client, viewer: Any
) -> None:
    UserPreference.objects.create(user=viewer, page_size=10)
    for _ in range(12):
        state.enqueue("noop", {}, priority=3)
    report = state.enqueue("generate_report", {"report": "r"}, priority=1)
    body = text(as_viewer.get("/jobs?type=generate_report"))
    assert short_id(report["id"]) in body and body.count('class="type-cell">noop') == 0
    first = text(as_viewer.get("/jobs"))
    assert first.count('id="job-') == 10 and "Page 1 of 2" in first
    second = text(as_viewer.get("/jobs?page=2"))
    assert second.count('id="job-') == 3
    by_priority = text(as_viewer.get("/jobs?ordering=priority"))
    assert by_priority.index('class="type-cell">generate_report') < by_priority.index(
        'class="type-cell">noop'
    )
    assert "data-live-prepend" in first and "data-live-prepend" not in by_priority


def test_the_ledgers_type_filter_offers_the_types_stored_jobs_have(as_viewer: Client) -> None:
    # A Django task's type is registered only where its module was imported (a worker),
    # and a type a deploy removed nowhere: the filter offered the registered names only.
    for name in ("myapp.tasks.add", "retired_report"):
        registry.register(name)(lambda payload: None)
        try:
            state.enqueue(name, {})
        finally:
            registry.unregister(name)
    state.enqueue("noop", {})

    ledger = text(as_viewer.get("/jobs"))
    offered = re.findall(r'<option value="([^"]+)"[^>]*>[^<]*</option>', ledger)
    assert {"myapp.tasks.add", "retired_report", "noop"} <= set(offered)
    assert "send_email" not in offered  # registered, but no job has it


def analyze_jobs() -> None:
    """Statistics as of now: a planner's estimate of a list will ignore the jobs created
    after. (Autovacuum cannot analyse `jobs` again until the test ends: ANALYZE holds its
    lock to the end of the test's transaction.)"""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs")


def test_lists_above_the_exact_count_say_about_and_page_to_their_last_row(
    as_operator: Client, operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Above EXACT_COUNT_LIMIT a list's count is the planner's estimate, here 1 for jobs of a
    # queue (or dead letters) the statistics never saw. It was shown as exact and bounded
    # the pages: "4 jobs", one page, the oldest jobs out of reach.
    monkeypatch.setattr("jobs.selectors.EXACT_COUNT_LIMIT", 3)
    UserPreference.objects.create(user=operator, page_size=10)
    for _ in range(5):
        state.enqueue("noop", {}, priority=2)
    analyze_jobs()
    reports = [state.enqueue("noop", {"n": n}, priority=2, queue="reports") for n in range(25)]

    first = text(as_operator.get("/jobs?queue=reports"))
    assert re.search(r"about \d+ jobs match these filters", first)
    assert re.search(r"Page 1 of about \d+", first)
    assert "Cancel all matching…" in first  # the confirmation page counts them exactly
    assert 'href="?queue=reports&amp;page=2">Next' in first
    second = text(as_operator.get("/jobs?queue=reports&page=2"))
    assert 'href="?queue=reports&amp;page=3">Next' in second
    last = text(as_operator.get("/jobs?queue=reports&page=3"))
    assert last.count('id="job-') == 5 and short_id(reports[0]["id"]) in last
    assert "25 jobs match these filters" in last and "Page 3 of 3" in last
    assert '<span class="btn small disabled">Next' in last
    # A page past the last row shows the last page, as Django's paginator does; one past
    # any table PostgreSQL can hold is never asked for.
    for past_the_end in (9, 10**20):
        past = text(as_operator.get(f"/jobs?queue=reports&page={past_the_end}"))
        assert short_id(reports[0]["id"]) in past and "Page 3 of 3" in past

    for n in range(12):
        dead_letter("noop", {"n": n})
    last_dead = Job.objects.filter(in_dlq=True).order_by("-updated_at", "id").last()
    # Narrowed by a search, the DLQ's count is estimated as any list's...
    first = text(as_operator.get("/dlq?q=noop"))
    assert re.search(r"about \d+ jobs used every attempt", first)
    assert "Purge all matching…" in first
    assert 'href="?q=noop&amp;page=2">Next' in first
    last = text(as_operator.get("/dlq?q=noop&page=2"))
    assert "12 jobs used every attempt" in last and "Page 2 of 2" in last
    assert short_id(last_dead.id) in last and "Purge all 12 matching…" in last
    # ... the whole of it is counted by its counter, exactly, as the nav's badge: it read
    # "about 10,001" beside a badge of 10,030.
    whole = text(as_operator.get("/dlq"))
    assert "12 jobs used every attempt" in whole and "Page 1 of 2" in whole


def test_ledger_shows_a_bad_filter_next_to_its_field(as_viewer: Client) -> None:
    response = as_viewer.get("/jobs?created_after=yesterday-ish&priority=7")
    assert response.status_code == 200
    body = text(response)
    assert "created_after: Enter Unix milliseconds" in body
    assert "7 is not a priority" in body


def test_ledger_time_bounds_are_read_in_the_users_time_zone(as_viewer: Client, viewer: Any) -> None:
    UserPreference.objects.create(user=viewer, time_zone="Asia/Tokyo")
    job = state.enqueue("noop", {}, priority=2)
    created = timezone.localtime(
        Job.objects.get(id=job["id"]).created_at, timezone=timezone.get_fixed_timezone(9 * 60)
    )
    just_before = (created - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    just_after = (created + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    page = text(as_viewer.get(f"/jobs?created_after={just_before}"))
    assert short_id(job["id"]) in page
    assert short_id(job["id"]) not in text(as_viewer.get(f"/jobs?created_after={just_after}"))
    # The form keeps the bound given and leaves the others empty.
    assert f'name="created_after" value="{just_before}"' in page
    assert 'name="created_before" value=""' in page and 'value="None"' not in page


def test_row_fragment_answers_only_for_jobs_passing_the_filters(as_viewer: Client) -> None:
    job = state.enqueue("noop", {}, priority=2)
    matching = as_viewer.get(f"/jobs/{job['id']}/row?match=1&type=noop", **HTMX)
    assert matching.status_code == 200 and f'id="job-{job["id"]}"' in text(matching)
    other = as_viewer.get(f"/jobs/{job['id']}/row?match=1&type=send_email", **HTMX)
    assert other.status_code == 204 and other.content == b""


# --- acting ----------------------------------------------------------------------------------


def test_viewer_actions_are_refused_with_403_and_change_nothing(as_viewer: Client) -> None:
    dead = dead_letter()
    pending = state.enqueue("noop", {}, priority=2)
    attempts = [
        (f"/jobs/{pending['id']}/cancel", {}),
        (f"/jobs/{dead['id']}/retry", {}),
        (f"/jobs/{dead['id']}/purge", {}),
        ("/jobs/new", {"type": "noop", "payload": "{}", "priority": "2"}),
        ("/dlq/retry", {"all": "1"}),
        ("/dlq/empty", {}),
        ("/settings/webhooks", {"url": "http://127.0.0.1:9/h", "secret": "s"}),
    ]
    for path, data in attempts:
        response = as_viewer.post(path, data)
        assert response.status_code == 403, path
        assert "for operators" in text(response)
    assert as_viewer.get("/dlq/retry?all=1").status_code == 403
    assert as_viewer.get("/dlq/empty").status_code == 403
    assert Job.objects.get(id=pending["id"]).status == JobStatus.PENDING
    assert Job.objects.get(id=dead["id"]).in_dlq
    assert Job.objects.count() == 2


def test_operator_cancels_from_the_ledger_row(as_operator: Client) -> None:
    job = state.enqueue("noop", {}, priority=2)
    response = as_operator.post(f"/jobs/{job['id']}/cancel", **HTMX)
    assert response.status_code == 200
    body = text(response)
    assert body.lstrip().startswith(f'<tr id="job-{job["id"]}"')
    assert "pill-cancelled" in body and "Job cancelled." in body
    assert Job.objects.get(id=job["id"]).status == JobStatus.CANCELLED


def test_a_job_that_moved_on_is_a_409_shown_in_its_row(as_operator: Client) -> None:
    done = completed()
    response = as_operator.post(f"/jobs/{done['id']}/cancel", **HTMX)
    assert response.status_code == 409
    body = text(response)
    assert "This job moved on: it is now completed." in body
    assert f'id="job-{done["id"]}"' in body and "pill-completed" in body


def test_a_409_without_htmx_renders_the_job_page_around_the_error(as_operator: Client) -> None:
    done = completed()
    response = as_operator.post(f"/jobs/{done['id']}/retry")
    assert response.status_code == 409
    body = text(response)
    assert 'id="action-error"' in body and "it is now completed" in body
    assert "<h1>noop" in body


def test_an_action_from_a_page_whose_session_or_form_expired_reloads_rather_than_breaks(
    operator: Any,
) -> None:
    # A row's button is an htmx POST whose answer replaces the row: a login page (the
    # session ended) or the CSRF failure page (a login in another tab renewed the token)
    # were swapped into the table. Now htmx is told to go to the login page, back to the
    # page the user was on, or to reload it with a note.
    pending = state.enqueue("noop", {})
    htmx = {**HTMX, "HTTP_HX_CURRENT_URL": "http://testserver/jobs?type=noop"}
    logged_out = Client().post(f"/jobs/{pending['id']}/cancel", **htmx)
    assert logged_out.status_code == 200 and not text(logged_out)
    assert logged_out["HX-Redirect"] == "/accounts/login/?next=/jobs%3Ftype%3Dnoop"
    stale = Client(enforce_csrf_checks=True)
    stale.force_login(operator)
    refused = stale.post(f"/jobs/{pending['id']}/cancel", **htmx)
    assert refused["HX-Refresh"] == "true" and not text(refused)
    reloaded = text(stale.get("/jobs?type=noop"))
    assert "The page had expired" in reloaded
    # A plain form post gets a console page saying what to do, not Django's bare one.
    form = stale.post(f"/jobs/{pending['id']}/cancel")
    assert form.status_code == 403
    assert "The page had expired" in text(form) and 'class="topbar' in text(form)
    # Every cookie cleared (no session, no CSRF cookie): the CSRF check fails first, and
    # Django's bare 403 page was swapped into the table. It goes to the login page too.
    cleared = Client(enforce_csrf_checks=True)
    refused = cleared.post(f"/jobs/{pending['id']}/cancel", **htmx)
    assert refused["HX-Redirect"] == "/accounts/login/?next=/jobs%3Ftype%3Dnoop"
    assert cleared.post(f"/jobs/{pending['id']}/cancel").url.startswith("/accounts/login/")
    assert Job.objects.get(id=pending["id"]).status == JobStatus.PENDING


def test_retry_from_dlq_detail_takes_the_job_out_of_the_dlq(as_operator: Client) -> None:
    dead = dead_letter()
    response = as_operator.post(f"/jobs/{dead['id']}/retry", follow=True)
    assert response.redirect_chain[0][0] == f"/jobs/{dead['id']}"
    assert "left the dead-letter queue" in text(response)
    job = Job.objects.get(id=dead["id"])
    assert job.status == JobStatus.PENDING and not job.in_dlq and job.attempt_count == 0


def test_purge_from_dlq_detail_deletes_the_job(as_operator: Client) -> None:
    dead = dead_letter()
    response = as_operator.post(f"/jobs/{dead['id']}/purge", follow=True)
    assert response.redirect_chain[0][0] == "/dlq"
    assert "purged" in text(response)
    assert not Job.objects.filter(id=dead["id"]).exists()
    gone = as_operator.post(f"/jobs/{dead['id']}/purge", **HTMX)
    assert gone.status_code == 404 and "no longer exists" in text(gone)


def test_bulk_retry_asks_for_confirmation_first(as_operator: Client) -> None:
    first, second, third = dead_letter(), dead_letter(), dead_letter()
    confirm = as_operator.get(f"/dlq/retry?id={first['id']}&id={second['id']}")
    assert confirm.status_code == 200
    assert "<strong>2</strong> jobs" in text(confirm)
    assert Job.objects.filter(in_dlq=True).count() == 3
    response = as_operator.post("/dlq/retry", {"id": [first["id"], second["id"]]}, follow=True)
    assert "2 job(s) back to pending" in text(response)
    assert list(Job.objects.filter(in_dlq=True).values_list("id", flat=True)) == [
        uuid.UUID(third["id"])
    ]
    whole = as_operator.get("/dlq/retry", {"all": "1"})
    form = {"all": "1", "as_of": whole.context["as_of"]}
    everything = as_operator.post("/dlq/retry", form, follow=True)
    assert "1 job(s) back to pending" in text(everything)
    assert not Job.objects.filter(in_dlq=True).exists()


def test_empty_dlq_asks_for_confirmation_first(as_operator: Client) -> None:
    dead_letter(), dead_letter()
    kept = state.enqueue("noop", {}, priority=2)
    confirm = as_operator.get("/dlq/empty")
    assert "<strong>2</strong> jobs" in text(confirm) and "cannot be undone" in text(confirm)
    assert Job.objects.count() == 3
    response = as_operator.post("/dlq/empty", {"as_of": confirm.context["as_of"]}, follow=True)
    assert "2 job(s) purged" in text(response)
    assert list(Job.objects.values_list("id", flat=True)) == [uuid.UUID(kept["id"])]


# --- creating --------------------------------------------------------------------------------


def test_create_job_shows_a_bad_payload_next_to_the_payload_field(as_operator: Client) -> None:
    response = as_operator.post(
        "/jobs/new",
        {"type": "send_email", "payload": '{"subject": "hi"}', "priority": "1"},
    )
    assert response.status_code == 400
    body = text(response)
    payload_field = body[body.index('id="field-payload"') :].split('<div class="field')[0]
    assert "payload.to: This field is required." in payload_field
    assert "&quot;subject&quot;: &quot;hi&quot;" in body  # what was typed is kept
    assert Job.objects.count() == 0


def test_create_job_in_a_queue_of_the_operators_choice(as_operator: Client) -> None:
    # Queues are first-class (the Queues page pauses and limits them), and the API takes one.
    form = {"type": "noop", "payload": "{}", "priority": "2"}
    created = as_operator.post("/jobs/new", {**form, "queue": "emails"}, follow=True)
    assert Job.objects.get().queue == "emails" and "emails" in text(created)
    refused = as_operator.post("/jobs/new", {**form, "queue": "two words"})
    body = text(refused)
    assert refused.status_code == 400
    assert "A queue name is 1 to 100 letters" in body[body.index('id="field-queue"') :]
    # Left empty: the job type's queue, else default.
    as_operator.post("/jobs/new", form)
    assert Job.objects.order_by("created_at").last().queue == "default"


def test_create_job_reports_json_and_field_errors(as_operator: Client) -> None:
    response = as_operator.post(
        "/jobs/new",
        {"type": "noop", "payload": "{not json", "priority": "2", "depends_on": str(uuid.uuid4())},
    )
    assert response.status_code == 400
    assert "Not valid JSON" in text(response)
    past = as_operator.post(
        "/jobs/new",
        {
            "type": "noop",
            "payload": "[]",
            "priority": "2",
            "scheduled_at": "2001-01-01T00:00",
            "depends_on": str(uuid.uuid4()),
        },
    )
    body = text(past)
    assert "Must be a JSON object." in body[body.index('id="field-payload"') :]
    assert "Must be in the future." in body[body.index('id="field-scheduled_at"') :]
    assert Job.objects.count() == 0


def test_create_job_in_the_users_time_zone(as_operator: Client, operator: Any) -> None:
    UserPreference.objects.create(user=operator, time_zone="America/New_York")
    upstream = state.enqueue("noop", {}, priority=2)
    response = as_operator.post(
        "/jobs/new",
        {
            "type": "generate_report",
            "payload": '{"report": "weekly"}',
            "priority": "3",
            "scheduled_at": "2099-07-01T09:30",
            "recur_interval": "every_1_hour",
            "depends_on": upstream["id"],
            "max_retries": "5",
        },
    )
    job = Job.objects.exclude(id=upstream["id"]).get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.id}"
    assert job.scheduled_at.isoformat() == "2099-07-01T13:30:00+00:00"
    assert (job.priority, job.max_retries, job.recur_interval) == (3, 5, "every_1_hour")
    assert job.depends_on_id == uuid.UUID(upstream["id"])


def test_create_form_lists_the_registered_handlers(as_operator: Client) -> None:
    body = text(as_operator.get("/jobs/new"))
    for name in ("send_email", "http_request", "generate_report", "noop", "flaky"):
        assert f'<option value="{name}"' in body


# --- settings --------------------------------------------------------------------------------


def test_preferences_persist_and_apply(as_viewer: Client, viewer: Any) -> None:
    response = as_viewer.post(
        "/settings/preferences", {"time_zone": "Europe/Paris", "page_size": "50", "theme": "dark"}
    )
    assert response.status_code == 302
    saved = UserPreference.objects.get(user=viewer)
    assert (saved.time_zone, saved.page_size, saved.theme) == ("Europe/Paris", 50, "dark")
    body = text(as_viewer.get("/settings"))
    assert 'data-theme="dark"' in body and 'data-tz="Europe/Paris"' in body
    assert '<option value="Europe/Paris" selected>' in body
    job = state.enqueue("noop", {}, priority=2)
    detail = text(as_viewer.get(f"/jobs/{job['id']}"))
    assert re.search(r"\d\d:\d\d:\d\d\.\d{3} CE[S]?T", detail)
    bad = as_viewer.post(
        "/settings/preferences", {"time_zone": "Mars/Olympus", "page_size": "7", "theme": "dark"}
    )
    assert bad.status_code == 400
    assert "Select a valid choice" in text(bad)
    assert UserPreference.objects.get(user=viewer).time_zone == "Europe/Paris"


def test_settings_masks_secrets(viewer: Any, settings: Any) -> None:
    settings.DATABASE_URL = "postgres://app:hunter2@db.internal:5432/jobs"
    settings.REDIS_URL = "redis://:s3cr3t-redis@cache.internal:6379/0"
    settings.SECRET_KEY = "super-secret-signing-key-0123456789-abcdefghijklmnopqrstuvwxyz"
    settings.API_TOKEN_FAILURE_LIMIT = "7/min"
    body = text(login(viewer).get("/settings"))
    for secret in ("hunter2", "s3cr3t-redis", "super-secret-signing-key"):
        assert secret not in body
    # A setting naming a token without being one (a rate) is shown.
    assert re.search(r"API_TOKEN_FAILURE_LIMIT</[^>]+>\s*<[^>]+>7/min<", body)
    assert "postgres://app:••••••••@db.internal:5432/jobs" in body
    assert "redis://:••••••••@cache.internal:6379/0" in body
    assert "SCHEDULER_DEFAULT_MAX_RETRIES" in body and "CONSOLE_STALE_WORKER_SECONDS" in body


def test_settings_says_a_setting_left_empty_is_empty(viewer: Any, settings: Any) -> None:
    # An empty value (no rate limit) was a blank cell, which read as a page that failed.
    settings.API_RATE_LIMIT = ""
    body = text(login(viewer).get("/settings"))
    assert re.search(r"API_RATE_LIMIT</[^>]+>\s*<[^>]+>\(empty\)<", body)


def test_every_console_form_carries_a_csrf_token(as_operator: Client) -> None:
    dead = dead_letter()
    state.enqueue("noop", {}, priority=2)
    for path in ["/", "/jobs", "/jobs/new", "/dlq", f"/dlq/{dead['id']}", "/settings"]:
        body = text(as_operator.get(path))
        assert '"X-CSRFToken": "' in body, path
        for form in re.findall(r'<form[^>]*method="post".*?</form>', body, re.S):
            assert "csrfmiddlewaretoken" in form, (path, form[:80])


def test_csrf_is_enforced(operator: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    job = state.enqueue("noop", {}, priority=2)
    assert client.post(f"/jobs/{job['id']}/cancel").status_code == 403
    assert Job.objects.get(id=job["id"]).status == JobStatus.PENDING


def test_operator_manages_webhooks_from_settings(as_operator: Client) -> None:
    bad = as_operator.post(
        "/settings/webhooks", {"url": "ftp://example.com/x", "event_types": [], "secret": "s"}
    )
    assert bad.status_code == 400
    body = text(bad)
    assert "Enter an http:// or https:// URL." in body[body.index('id="field-url"') :]
    assert not Webhook.objects.exists()
    created = as_operator.post(
        "/settings/webhooks",
        {
            "url": "https://hooks.example.com/hooks",
            "event_types": ["job.dlq_entry", "job.completed"],
            "secret": "whsec-123",
        },
        follow=True,
    )
    hook = Webhook.objects.get()
    assert hook.event_types == ["job.dlq_entry", "job.completed"]
    page = text(created)
    assert "https://hooks.example.com/hooks" in page and "whsec-123" not in page
    tested = as_operator.post(f"/settings/webhooks/{hook.id}/test", follow=True)
    delivery = Job.objects.get(type="http_request")
    assert f"Test delivery queued as job {short_id(delivery.id)}" in text(tested)
    assert delivery.payload["url"] == "https://hooks.example.com/hooks"
    # Removing one is confirmed first, as deleting a schedule is: it was one click.
    confirm = page[page.index('<summary class="btn small ghost">Remove…</summary>') :]
    assert confirm.index("Remove this webhook?") < confirm.index(">Remove webhook</button>")
    as_operator.post(f"/settings/webhooks/{hook.id}/delete")
    assert not Webhook.objects.exists()


def test_viewer_sees_webhooks_but_no_webhook_buttons(as_viewer: Client, operator: Any) -> None:
    Webhook.objects.create(
        url="http://127.0.0.1:9/seen", event_types=["job.failed"], secret="x", created_by=operator
    )
    body = text(as_viewer.get("/settings"))
    assert "http://127.0.0.1:9/seen" in body
    assert "Send test" not in body and "Add webhook" not in body
    hook = Webhook.objects.get()
    assert as_viewer.post(f"/settings/webhooks/{hook.id}/test").status_code == 403
    assert as_viewer.post(f"/settings/webhooks/{hook.id}/delete").status_code == 403
    assert Webhook.objects.exists() and not Job.objects.exists()


def test_job_detail_shows_attempts_and_handler_logs(as_viewer: Client) -> None:
    job = state.enqueue("generate_report", {"report": "q4"}, priority=2)
    claimed = start(job["id"])
    state.append_logs(
        claimed.id, claimed.attempt_id, [(timezone.now(), "WARNING", "slow upstream: 3.2 s")]
    )
    body = text(as_viewer.get(f"/jobs/{job['id']}"))
    assert "slow upstream: 3.2 s" in body and "log-warning" in body
    assert "Attempt 1" in body and "pill-running" in body


def test_dlq_charts_are_server_side_svg_with_their_numbers(as_viewer: Client) -> None:
    for _ in range(3):
        dead_letter(type="flaky", error="simulated failure")
    dead_letter(type="http_request", payload={"url": "http://127.0.0.1:9/"}, error="refused")
    body = text(as_viewer.get("/dlq"))
    charts = re.findall(r"<svg class=\"chart[^\"]*\".*?</svg>", body, re.S)
    assert len(charts) == 3
    by_type, by_error, over_time = charts
    assert "<title>flaky: 3</title>" in by_type and "<title>http_request: 1</title>" in by_type
    assert "<title>simulated failure: 3</title>" in by_error
    hour = timezone.localtime().strftime("%Y-%m-%d %H:00")
    assert f"<title>{hour}: 4</title>" in over_time
    detail = text(as_viewer.get(f"/dlq/{dead_letter()['id']}"))
    assert '<svg class="chart timeline"' in detail and "DLQ</text>" in detail


def test_a_409_names_what_the_job_became(as_operator: Client) -> None:
    dead = dead_letter()
    body = text(as_operator.post(f"/jobs/{dead['id']}/cancel", **HTMX))
    assert "This job moved on: it is now in the dead-letter queue." in body
    pending = state.enqueue("noop", {}, priority=2)
    refused = as_operator.post(f"/jobs/{pending['id']}/retry", **HTMX)
    assert refused.status_code == 409
    assert "This job moved on: it is now pending." in text(refused)


def test_row_fragment_of_a_purged_job_says_so(as_viewer: Client) -> None:
    dead = dead_letter()
    state.purge(uuid.UUID(dead["id"]))
    response = as_viewer.get(f"/jobs/{dead['id']}/row", **HTMX)
    assert response.status_code == 200
    assert f'id="job-{dead["id"]}"' in text(response) and "This job was purged." in text(response)


# --- hostile input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("[" * 3000 + "]" * 3000, "nests more than 32 arrays and objects"),
        ('{"a": ' * 32 + "{}" + "}" * 32, "nests more than 32 arrays and objects"),
        (r'{"note": "a\u0000b"}', "NUL character"),
        (r'{"\u0000": 1}', "NUL character"),
        (r'{"note": "\ud800"}', "lone UTF-16 surrogate"),
    ],
)
def test_create_job_refuses_unstorable_payloads_next_to_the_field(
    as_operator: Client, payload: str, message: str
) -> None:
    response = as_operator.post("/jobs/new", {"type": "noop", "payload": payload, "priority": "2"})
    assert response.status_code == 400
    body = text(response)
    assert message in body[body.index('id="field-payload"') :].split('<div class="field')[0]
    assert Job.objects.count() == 0


@pytest.mark.parametrize("time_zone", ["UTC", "Pacific/Kiritimati", "Etc/GMT+12"])
@pytest.mark.parametrize("scheduled_at", ["9999-12-31T23:30", "0001-01-01T00:00"])
def test_create_job_refuses_times_out_of_range_next_to_the_field(
    as_operator: Client, operator: Any, time_zone: str, scheduled_at: str
) -> None:
    UserPreference.objects.create(user=operator, time_zone=time_zone)
    response = as_operator.post(
        "/jobs/new",
        {"type": "noop", "payload": "{}", "priority": "3", "scheduled_at": scheduled_at},
    )
    assert response.status_code == 400
    body = text(response)
    field = body[body.index('id="field-scheduled_at"') :].split('<div class="field')[0]
    assert "Out of range" in field or "Must be in the future." in field
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "value", ["0001-01-01T00:00:00+14:00", "0001-01-01T00:00", "9999-12-31T23:59", "-5"]
)
def test_ledger_shows_a_time_filter_out_of_range_next_to_its_field(
    as_viewer: Client, viewer: Any, value: str
) -> None:
    UserPreference.objects.create(user=viewer, time_zone="Pacific/Kiritimati")
    response = as_viewer.get("/jobs", {"scheduled_before": value, "created_after": value})
    assert response.status_code == 200
    body = text(response)
    assert "scheduled_before: Out of range" in body
    assert "created_after: Out of range" in body


# --- queues and limits ------------------------------------------------------------------------


def test_an_operator_pauses_a_queue_and_its_jobs_show_as_paused(as_operator) -> None:
    job = state.enqueue("noop", {}, queue="emails")
    response = as_operator.post("/queues/emails/pause", follow=True)
    assert "Queue emails paused" in text(response)
    assert 'class="pill pill-paused"' in text(response)
    assert 'class="pill pill-paused"' in text(as_operator.get(f"/jobs/{job['id']}"))
    assert 'class="pill pill-paused"' in text(as_operator.get("/jobs?queue=emails"))
    assert "Queue emails resumed" in text(as_operator.post("/queues/emails/resume", follow=True))
    assert queues.paused_queues() == set()


def test_limits_show_their_use_and_an_operator_sets_and_removes_them(as_operator) -> None:
    queues.set_limit("queue", "bulk", max_running=3)
    page = text(as_operator.get("/queues"))
    assert "0 of 3 running" in page
    response = as_operator.post(
        "/limits",
        {"scope": "type", "name": "noop", "max_starts": "10", "period_seconds": "60"},
        follow=True,
    )
    assert "0 of 10 starts in the last 60 s" in text(response)
    refused = as_operator.post("/limits", {"scope": "type", "name": "noop", "max_starts": "5"})
    assert refused.status_code == 400
    assert "max_starts and period_seconds go together" in text(refused)
    as_operator.post("/limits/queue/bulk/remove")
    assert list(Limit.objects.values_list("name", flat=True)) == ["noop"]
    # Any name a job type can have: listed, and removed by its own button.
    as_operator.post(
        "/limits", {"scope": "type", "name": "reports/daily summary", "max_running": "1"}
    )
    page = text(as_operator.get("/queues"))
    removal = "/limits/type/reports/daily%20summary/remove"
    assert "reports/daily summary" in page and removal in page
    as_operator.post(removal)
    assert list(Limit.objects.values_list("name", flat=True)) == ["noop"]


def test_what_became_of_a_limit_is_said_in_the_limits_section(as_operator) -> None:
    # The page opens at #limits: a message at its top was out of sight.
    def said_in_limits(response: Any) -> str:
        assert response.redirect_chain[-1][0] == "/queues#limits"
        page = response.content.decode()
        flashes = re.findall(r'<p class="flash flash-success">([^<]*)</p>', page)
        limits = page.index('id="limits"')
        assert len(flashes) == 1 and page.index('class="flash ') > limits, page
        return flashes[0]

    limit = {"scope": "queue", "name": "bulk", "max_running": "2"}
    saved = as_operator.post("/limits", limit, follow=True)
    assert said_in_limits(saved) == "Limit saved; every worker follows it from its next claim."
    removed = as_operator.post("/limits/queue/bulk/remove", follow=True)
    assert said_in_limits(removed) == "Limit on queue bulk removed."


def test_a_viewer_sees_queues_and_limits_but_cannot_act(as_viewer) -> None:
    state.enqueue("noop", {}, queue="emails")
    page = text(as_viewer.get("/queues"))
    assert "emails" in page and "/queues/emails/pause" not in page and "Save limit" not in page
    assert as_viewer.post("/queues/emails/pause").status_code == 403


def test_a_time_in_a_list_names_its_year_when_it_is_not_this_years() -> None:
    now = timezone.localtime(timezone.now())
    # "Jun 06, 23:05" was last June or the one before: a month's history spans New Year.
    last_year = now.replace(year=now.year - 1, month=6, day=6, hour=23, minute=5)
    assert f">Jun 06 {now.year - 1}, 23:05</time>" in when(last_year)
    assert now.strftime(">%H:%M:%S</time>") in when(now)


@pytest.mark.parametrize(
    ("url", "secret", "field", "said"),
    [
        ("https://ops:hunter2@hooks.example.com/h", "s", "url", "Must not hold a user name"),
        # Refused, not saved trimmed: a receiver signing with the secret as typed would
        # refuse every delivery.
        ("https://hooks.example.com/h", "  päd sec  ", "secret", "begin or end with whitespace"),
    ],
)
def test_a_webhook_form_refuses_credentials_in_the_url_and_spaces_around_the_secret(
    as_operator: Client, url: str, secret: str, field: str, said: str
) -> None:
    form = {"url": url, "event_types": ["job.failed"], "secret": secret}
    refused = as_operator.post("/settings/webhooks", form)
    assert refused.status_code == 400
    body = text(refused)
    assert said in body[body.index(f'id="field-{field}"') :]
    assert not Webhook.objects.exists()


def test_a_job_two_steps_below_a_dead_letter_names_it_on_its_page(as_viewer: Client) -> None:
    dead = dead_letter()
    middle = state.enqueue("noop", {}, depends_on=uuid.UUID(dead["id"]))
    job = state.enqueue("noop", {}, depends_on=uuid.UUID(middle["id"]))
    for waiting in (middle, job):
        page = text(as_viewer.get(f"/jobs/{waiting['id']}"))
        notice = page[page.index('id="waiting-on-dlq"') :]
        notice = notice[: notice.index("</div>")]
        assert "Waiting on 1 upstream job in the dead-letter queue" in notice
        assert f'href="/dlq/{dead["id"]}"' in notice and short_id(dead["id"]) in notice
    why = page[page.index('id="explain"') : page.index("</section>", page.index('id="explain"'))]
    assert f"noop {short_id(middle['id'])} (blocked)" in why
    assert f"retried and completes: flaky {short_id(dead['id'])}." in why
    assert '<span class="list-meta">blocked</span>' in why


def test_new_dependent_job_is_offered_only_for_a_type_the_new_job_form_takes(
    as_operator: Client,
) -> None:
    # The form takes the submittable types: not an internal `bulk_action` job's, nor one no
    # handler is registered for any more.
    bulk_job = bulk.start("cancel", bulk.Selection(query={"type": "noop"}, dlq=False), 0)
    registry.register("retired_report")(lambda payload: None)
    try:
        retired = state.enqueue("retired_report", {})
    finally:
        registry.unregister("retired_report")
    plain = state.enqueue("noop", {})
    for job, offered in ((bulk_job, False), (retired, False), (plain, True)):
        page = text(as_operator.get(f"/jobs/{job['id']}"))
        assert ("New dependent job" in page) is offered, job["type"]
    form = text(as_operator.get(f"/jobs/new?depends_on={plain['id']}&type=noop"))
    assert '<option value="noop" selected>' in form
