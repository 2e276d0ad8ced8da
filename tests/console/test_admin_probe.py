"""The admin at its edges, as an operator meets them: a selection or an address naming no
row, a filter no list offers, a page of many rows, a schedule deleted while it was ticked.
Each was a 500, a query a row, or a success claimed for nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import queues, state
from jobs.api.auth import issue_token
from jobs.models import (
    ApiToken,
    AuditEntry,
    Job,
    JobStatus,
    Limit,
    Queue,
    Schedule,
    Webhook,
    Worker,
)
from tests.attempts import fail_attempt

from .test_admin import DLQ, JOBS, to_dlq

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="node-1", pid=4242, started_at=now, heartbeat_at=now)


def notes_after(client: Client, response: Any) -> list[tuple[str, str]]:
    """The messages of the page a response redirects to, as the operator reads them."""
    assert response.status_code == 302, response.status_code
    shown = client.get(response["Location"])
    assert shown.status_code == 200
    return [(m.level_tag, str(m)) for m in shown.context["messages"]]


def tick(client: Client, url: str, name: str, values: list[str]) -> Any:
    """Run the action `name` on the rows whose ids are `values`, as the list's form posts."""
    return client.post(url, {"action": name, "index": "0", "_selected_action": values})


# --- a selection that names no row ---------------------------------------------------------


def _schedule() -> Schedule:
    return Schedule.objects.get(id=state.enqueue("noop", {}, cron="0 6 * * *")["schedule_id"])


def _webhook() -> Webhook:
    return Webhook.objects.create(
        url="https://hooks.example.com/in", event_types=["job.failed"], secret="s" * 20
    )


def _limit() -> Limit:
    queues.set_limit("queue", "emails", max_running=2, max_starts=None, period_seconds=None)
    return Limit.objects.get(scope="queue", name="emails")


def _token() -> ApiToken:
    issue_token(get_user_model().objects.create_user("tok"))
    return ApiToken.objects.get()


@pytest.mark.parametrize(
    ("url", "name", "existing", "stays"),
    [
        ("/admin/jobs/schedule/", "pause_selected", _schedule, lambda s: not s.paused),
        ("/admin/jobs/webhook/", "send_test_delivery", _webhook, lambda w: True),
        ("/admin/jobs/limit/", "delete_selected", _limit, lambda limit: True),
        ("/admin/jobs/apitoken/", "delete_selected", _token, lambda t: True),
        ("/admin/jobs/queue/", "pause_selected", lambda: queues.resume("emails"), None),
    ],
)
# None can be a UUID, a number of the integer column, or a queue's name.
@pytest.mark.parametrize("bad", ["not an id!", "", "a\x00b", "9" * 101])
def test_an_action_on_a_value_that_is_no_id_is_refused_with_a_message(
    superuser_client: Client,
    url: str,
    name: str,
    existing: Callable[[], Any],
    stays: Callable[[Any], bool] | None,
    bad: str,
) -> None:
    """A form typed by hand, or kept from another list, may post anything as a selected row:
    compared with the primary key by the database, a value that can be no id (not a UUID,
    not a number, past the integer column's range, NUL in a queue's name) was a 500. The
    whole selection is refused, with a message, and nothing is done to the rows it also
    names."""
    row = existing()
    jobs_before = Job.objects.count()
    model = url.split("/")[-2]
    valid = [] if model == "queue" else [str(row.pk)]

    response = tick(superuser_client, url, name, [*valid, bad])

    assert response.status_code == 302
    assert response["Location"] == url
    notes = notes_after(superuser_client, response)
    assert len(notes) == 1 and notes[0][0] == "error", notes
    assert "is no id of" in notes[0][1] and "nothing was done" in notes[0][1], notes
    assert Job.objects.count() == jobs_before  # no test delivery queued
    if stays is not None:
        (kept,) = type(row).objects.filter(pk=row.pk)  # not deleted
        assert stays(kept)
    else:
        assert not Queue.objects.get(name="emails").paused


@pytest.mark.parametrize("action", ["retry_selected", "purge_selected"])
def test_a_dlq_action_on_a_value_that_is_no_job_id_retries_and_purges_nothing(
    superuser_client: Client, worker: Worker, action: str
) -> None:
    dead = to_dlq(worker)

    response = superuser_client.post(
        DLQ,
        {"action": action, "index": "0", "post": "yes", "_selected_action": [str(dead.id), "zz"]},
    )

    (note,) = notes_after(superuser_client, response)
    assert note[0] == "error" and "is no id of a dead-letter job" in note[1], note
    dead.refresh_from_db()
    assert dead.in_dlq and dead.status == JobStatus.FAILED


@pytest.mark.parametrize("suffix", ["change/", "history/"])
def test_a_queue_address_holding_nul_is_a_queue_that_does_not_exist(
    superuser_client: Client, suffix: str
) -> None:
    """A queue's page is found by its name, text: NUL, which no text in PostgreSQL holds,
    made the look-up fail (a 500) where any other missing name says it does not exist."""
    response = superuser_client.get(f"/admin/jobs/queue/a%00b/{suffix}")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    (note,) = notes_after(superuser_client, response)
    assert note[0] == "warning" and note[1].endswith("exist. Perhaps it was deleted?"), note


def test_a_queue_deletion_page_holding_nul_is_refused_as_any_queue_deletion(
    superuser_client: Client,
) -> None:
    # No queue is deleted here (it exists as long as a job names it): a 403, not a 500.
    assert superuser_client.get("/admin/jobs/queue/a%00b/delete/").status_code == 403


# --- a filter no list offers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "query"),
    [
        (JOBS, "last_error__regex=("),
        (JOBS, "id__regex=("),
        # Reads every job's error: no index holds it.
        (JOBS, "last_error__icontains=boom"),
        (JOBS, "queue=default"),
        (DLQ, "type__iregex=[z-a]"),
        ("/admin/jobs/queue/", "name__regex=("),
        ("/admin/jobs/webhook/", "url__regex=("),
        ("/admin/jobs/auditentry/", "target__regex=("),
        ("/admin/jobs/worker/", "hostname__exact=node-1"),
    ],
)
def test_a_list_filters_by_its_own_filters_only(
    superuser_client: Client, worker: Worker, url: str, query: str
) -> None:
    """Django applies any lookup on a column typed into a list's address: a regular
    expression the database cannot read was a 500, and a lookup no index holds read every
    job (as the sorts no index holds, `?o=`, no longer sort). The list says which parameter
    it does not filter by, and shows itself unfiltered."""
    to_dlq(worker)

    response = superuser_client.get(f"{url}?{query}")

    assert response.status_code == 302
    assert response["Location"] == f"{url}?e=1"
    name = query.split("=")[0]
    assert notes_after(superuser_client, response) == [
        ("error", f"This list has no filter {name}: it is shown unfiltered.")
    ]


def test_the_lists_own_filters_still_filter(superuser_client: Client, worker: Worker) -> None:
    dead = to_dlq(worker, "flaky")
    waiting = Job.objects.get(id=state.enqueue("noop", {})["id"])

    def listed(url: str) -> set[Any]:
        response = superuser_client.get(url)
        assert response.status_code == 200, url
        return {row.pk for row in response.context["cl"].result_list}

    assert listed(f"{JOBS}?status__exact=failed&in_dlq__exact=1") == {dead.id}
    assert listed(f"{JOBS}?type=noop&priority__exact=2&recur_interval__isnull=True") == {waiting.id}
    assert listed(f"{DLQ}?type=flaky&q={str(dead.id)[-8:]}") == {dead.id}
    assert listed("/admin/jobs/worker/?hostname=node-1&status__exact=running") == {worker.id}
    tick(superuser_client, DLQ, "retry_selected", [str(dead.id)])
    (retried,) = listed(
        "/admin/jobs/auditentry/?period=24h&action__exact=retry&source__exact=admin"
    )
    assert AuditEntry.objects.get(pk=retried).target == str(dead.id)


# --- pages of many rows ------------------------------------------------------------------------


def _users(n: int, tag: str) -> list[Any]:
    # Without a password: hashing one costs more than the rest of a test.
    User = get_user_model()
    return User.objects.bulk_create([User(username=f"user-{tag}-{i}") for i in range(n)])


def _jobs(n: int, tag: str) -> None:
    """`n` jobs, half of them dead letters."""
    now = timezone.now()
    jobs = [
        uuid.UUID(state.enqueue("noop", {"n": i}, max_retries=1, queue=f"q-{tag}-{i % 3}")["id"])
        for i in range(n)
    ]
    worker = Worker.objects.create(hostname=f"w-{tag}", pid=1, started_at=now, heartbeat_at=now)
    claimed = state.claim(worker.id, n, jobs[: n // 2 + 1])
    state.fail(
        [
            state.Failure(
                one.id, one.attempt_id, "RuntimeError", "boom", None, timedelta(0), timezone.now()
            )
            for one in claimed
        ]
    )


def _schedules(n: int, tag: str) -> None:
    for i in range(n):
        state.enqueue("noop", {}, cron=f"{i % 60} 6 * * *")


def _queues(n: int, tag: str) -> None:
    for i in range(n):
        queues.pause(f"paused-{tag}-{i}")


def _limits(n: int, tag: str) -> None:
    for i in range(n):
        queues.set_limit(
            "queue", f"limited-{tag}-{i}", max_running=3, max_starts=None, period_seconds=None
        )


def _workers(n: int, tag: str) -> None:
    now = timezone.now()
    Worker.objects.bulk_create(
        [
            Worker(hostname=f"host-{tag}-{i}", pid=i + 1, started_at=now, heartbeat_at=now)
            for i in range(n)
        ]
    )


def _webhooks(n: int, tag: str) -> None:
    Webhook.objects.bulk_create(
        [
            Webhook(
                url=f"https://hooks-{tag}-{i}.example.com/in",
                event_types=["job.failed"],
                secret="s" * 20,
                created_by=user,
            )
            for i, user in enumerate(_users(n, tag))
        ]
    )


def _tokens(n: int, tag: str) -> None:
    for user in _users(n, tag):
        issue_token(user)


def _audit_entries(n: int, tag: str) -> None:
    AuditEntry.objects.bulk_create(
        [
            AuditEntry(username="ops", source="admin", action="retry", target=f"t-{tag}-{i}")
            for i in range(n)
        ]
    )


@pytest.mark.parametrize(
    ("model", "add_rows"),
    [
        ("job", _jobs),
        ("deadletterjob", _jobs),
        ("schedule", _schedules),
        ("queue", _queues),
        ("limit", _limits),
        ("worker", _workers),
        ("webhook", _webhooks),
        ("apitoken", _tokens),
        ("auditentry", _audit_entries),
    ],
)
def test_a_list_of_100_rows_asks_as_many_queries_as_a_list_of_5(
    superuser_client: Client, model: str, add_rows: Callable[[int, str], None]
) -> None:
    """The webhooks' list read each one's author by itself (Django follows a nullable foreign
    key only when told to): 100 webhooks, 100 more queries."""
    url = f"/admin/jobs/{model}/"
    add_rows(5, "few")
    with CaptureQueriesContext(connection) as few:
        assert superuser_client.get(url).status_code == 200
    add_rows(95, "many")
    with CaptureQueriesContext(connection) as many:
        page = superuser_client.get(url)

    assert page.status_code == 200
    assert len(page.context["cl"].result_list) >= 50
    assert len(many) == len(few), [q["sql"][:120] for q in many.captured_queries]


def _failed_attempts(worker: Worker, attempts: int, lines: int) -> Job:
    """A job in the DLQ after `attempts` failed attempts, each of which logged `lines` lines."""
    job = state.enqueue("noop", {}, max_retries=attempts)
    for n in range(attempts):
        (claimed,) = state.claim(worker.id, 1, [uuid.UUID(job["id"])])
        state.append_logs(
            claimed.id,
            claimed.attempt_id,
            [(timezone.now(), "INFO", f"attempt {n + 1}, line {i}") for i in range(lines)],
        )
        fail_attempt(
            claimed.id,
            claimed.attempt_id,
            error_type="RuntimeError",
            error_message=f"boom {n + 1}",
            stack_trace="Traceback (most recent call last):\nRuntimeError: boom",
            retry_delay=timedelta(0),
        )
    return Job.objects.get(id=job["id"])


@pytest.mark.parametrize("url", [JOBS, DLQ])
def test_a_job_page_reads_its_attempts_and_log_lines_in_a_fixed_number_of_queries(
    superuser_client: Client, worker: Worker, url: str
) -> None:
    """Each log line read its attempt (stack trace and all) by itself to print "attempt 1 of
    <job id>", and each attempt its worker: 200 lines were 200 more queries. A line now says
    its attempt's number, read along with it."""
    small = _failed_attempts(worker, attempts=1, lines=1)
    large = _failed_attempts(worker, attempts=3, lines=40)

    # Once before counting: the first page of the process reads the content types.
    assert superuser_client.get(f"{url}{small.id}/change/").status_code == 200
    with CaptureQueriesContext(connection) as one:
        assert superuser_client.get(f"{url}{small.id}/change/").status_code == 200
    with CaptureQueriesContext(connection) as many:
        page = superuser_client.get(f"{url}{large.id}/change/")

    assert page.status_code == 200
    assert len(many) == len(one), [q["sql"][:120] for q in many.captured_queries]
    shown = page.content.decode()
    assert "attempt 3, line 39" in shown and "boom 2" in shown and "node-1:4242" in shown
    logs = page.context["inline_admin_formsets"][2]
    numbers = {
        line.form.instance.pk: field.contents()
        for line in logs
        for fieldset in line
        for row in fieldset
        for field in row
        if field.field["name"] == "from_attempt"
    }
    assert sorted(set(numbers.values())) == ["1", "2", "3"]


# --- schedules ticked, then deleted elsewhere ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "done", "verb"),
    [
        ("pause_selected", "Paused 1 schedule(s): their waiting runs were cancelled.", "paused"),
        ("resume_selected", "Resumed 1 schedule(s) from their next slot.", "resumed"),
        # A delete asks first, and its page names them (test_admin_schedule_deletion.py).
    ],
)
def test_a_schedule_deleted_since_it_was_ticked_is_named_not_claimed_done(
    superuser_client: Client, name: str, done: str, verb: str
) -> None:
    """The actions said "Paused: their waiting runs were cancelled." of schedules that no
    longer existed, as of any selection; the DLQ's actions name what had left it."""
    kept, gone = _schedule(), _schedule()
    if name == "resume_selected":
        state.pause_schedule(kept.id)  # so that resuming it changes it
    state.delete_schedule(gone.id)  # by someone else, from the console or the API

    response = tick(superuser_client, "/admin/jobs/schedule/", name, [str(kept.id), str(gone.id)])

    assert notes_after(superuser_client, response) == [
        ("success", done),
        (
            "warning",
            f"1 of the 2 selected schedule(s) had been deleted elsewhere since: not {verb}.",
        ),
    ]


def test_schedules_all_deleted_since_they_were_ticked_claim_nothing(
    superuser_client: Client,
) -> None:
    gone = _schedule()
    state.delete_schedule(gone.id)

    response = tick(superuser_client, "/admin/jobs/schedule/", "pause_selected", [str(gone.id)])

    assert notes_after(superuser_client, response) == [
        (
            "warning",
            "The 1 selected schedule(s) had been deleted elsewhere since: none was paused.",
        )
    ]
