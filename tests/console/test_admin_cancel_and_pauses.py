"""Three things an operator met in the admin and the audit log: a pause or resume that
changed nothing logged again, the queue actions' "Paused ." for a queue not in the list,
and no way to cancel jobs from the admin."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.test import APIClient

from jobs import admin as jobs_admin
from jobs import queues, state
from jobs.models import AuditEntry, Job, JobStatus, Queue

from .helpers import NEW_JOB_IN, login
from .test_admin_probe import notes_after, tick

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/admin/jobs/job/"
DLQ = "/admin/jobs/deadletterjob/"


# --- a pause or resume that changes nothing is not logged again -----------------------------


def _schedule_surfaces(
    api: APIClient, console: Client, admin: Client, schedule_id: str
) -> dict[str, Callable[[str], None]]:
    def by_api(verb: str) -> None:
        answer = api.post(f"/api/v1/schedules/{schedule_id}/{verb}")
        assert answer.status_code == 200
        assert answer.json()["paused"] is (verb == "pause")

    def by_console(verb: str) -> None:
        done = "Schedule paused." if verb == "pause" else "Schedule resumed."
        assert notes_after(console, console.post(f"/schedules/{schedule_id}/{verb}")) == [
            ("success", done)
        ]

    done: list[str] = []

    def by_admin(verb: str) -> None:
        answer = tick(admin, "/admin/jobs/schedule/", f"{verb}_selected", [schedule_id])
        # The admin says what its action changed: the repeat, nothing.
        already = "paused" if verb == "pause" else "running"
        repeated = done[-1:] == [verb]
        done.append(verb)
        assert notes_after(admin, answer) == (
            [("info", f"The 1 selected schedule(s) was already {already}: nothing changed.")]
            if repeated
            else [("success", SCHEDULES_CHANGED[verb])]
        )

    return {"api": by_api, "console": by_console, "admin": by_admin}


SCHEDULES_CHANGED = {
    "pause": "Paused 1 schedule(s): their waiting runs were cancelled.",
    "resume": "Resumed 1 schedule(s) from their next slot.",
}


def _queue_surfaces(
    api: APIClient, console: Client, admin: Client, name: str
) -> dict[str, Callable[[str], None]]:
    def by_api(verb: str) -> None:
        answer = api.post(f"/api/v1/queues/{name}/{verb}")
        assert answer.status_code == 200
        assert answer.json()["paused"] is (verb == "pause")

    def by_console(verb: str) -> None:
        ((level, _),) = notes_after(console, console.post(f"/queues/{name}/{verb}"))
        assert level == "success"

    def by_admin(verb: str) -> None:
        answer = tick(admin, "/admin/jobs/queue/", f"{verb}_selected", [name])
        ((level, _),) = notes_after(admin, answer)
        assert level == "success"

    return {"api": by_api, "console": by_console, "admin": by_admin}


@pytest.mark.parametrize("what", ["schedule", "queue"])
@pytest.mark.parametrize("surface", ["api", "console", "admin"])
def test_a_repeated_pause_or_resume_answers_as_the_first_and_is_logged_once(
    operator_client: APIClient, operator: Any, superuser_client: Client, what: str, surface: str
) -> None:
    """Pausing what is paused, or resuming what runs, is idempotent and changes nothing:
    it answers as the first did (the admin's schedule actions say it was so already), and
    the audit log holds one entry for each change, not a second "paused" for nothing.
    Queues and schedules follow the one rule."""
    console = login(operator)
    if what == "schedule":
        target_id = state.enqueue("noop", {}, cron="0 6 * * *")["schedule_id"]
        target = f"schedule {target_id}"
        act = _schedule_surfaces(operator_client, console, superuser_client, target_id)[surface]
    else:
        queues.resume("emails")  # listed in the admin; nobody acting, nothing logged
        target = "queue emails"
        act = _queue_surfaces(operator_client, console, superuser_client, "emails")[surface]

    for verb in ("pause", "pause", "resume", "resume"):
        act(verb)

    log = AuditEntry.objects.filter(target=target).order_by("id")
    assert [(e.action, e.source, e.before, e.after["paused"]) for e in log] == [
        (f"{what}_pause", surface, {"paused": False}, True),
        (f"{what}_resume", surface, {"paused": True}, False),
    ]
    # A schedule's entries name the run its pause cancelled and the one its resume created.
    assert [len(e.after.get("runs", [])) for e in log] == ([1, 1] if what == "schedule" else [0, 0])


# --- the admin's queue actions name the queue as the console does -----------------------------


def test_the_admin_names_a_paused_queue_as_the_console_does(superuser_client: Client) -> None:
    """A selection naming no queue of the list (a form typed by hand or kept from another
    page) read "Paused ." and did nothing; a queue paused read "Paused emails." and, on its
    page, "The queue “emails (paused)” was changed successfully"."""
    queues.resume("emails")
    queues.resume("reports")
    queue_list = "/admin/jobs/queue/"

    def notes(name: str, selected: list[str]) -> list[tuple[str, str]]:
        return notes_after(superuser_client, tick(superuser_client, queue_list, name, selected))

    assert notes("pause_selected", ["nosuch"]) == [
        ("warning", "No queue nosuch in this list: not paused.")
    ]
    assert not Queue.objects.filter(name="nosuch").exists()
    assert notes("pause_selected", ["emails"]) == [
        ("success", "Queue emails paused: its jobs stay pending.")
    ]
    assert notes("pause_selected", ["emails", "reports", "nosuch", "other"]) == [
        ("success", "Queues emails, reports paused: their jobs stay pending."),
        ("warning", "No queues nosuch, other in this list: not paused."),
    ]
    assert notes("resume_selected", ["emails"]) == [("success", "Queue emails resumed.")]

    changed = superuser_client.post(f"{queue_list}reports/change/", {"_continue": "1"})
    assert notes_after(superuser_client, changed) == [("success", "Queue reports resumed.")]
    added = superuser_client.post(f"{queue_list}add/", {"name": "fresh", "paused": "on"})
    assert notes_after(superuser_client, added) == [
        ("success", "Queue fresh paused: its jobs stay pending.")
    ]
    assert Queue.objects.get(name="fresh").paused


# --- "Cancel selected jobs" -------------------------------------------------------------------


def _staff(username: str, *codenames: str) -> Client:
    user = get_user_model().objects.create_user(username, password=f"pw-{username}")
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return login(user)


def _cancel(client: Client, jobs: list[dict[str, Any]], **extra: str) -> list[tuple[str, str]]:
    ids = [job["id"] for job in jobs]
    answer = client.post(
        JOBS, {"action": "cancel_selected", "index": "0", "_selected_action": ids, **extra}
    )
    return notes_after(client, answer)


def _now(job: dict[str, Any]) -> tuple[str, bool]:
    row = Job.objects.get(id=job["id"])
    return row.status, row.in_dlq


def test_an_operator_cancels_selected_jobs_and_each_is_logged_as_the_consoles_cancel(
    operator: Any,
) -> None:
    """The unfinished of the selection are cancelled through `jobs.state`, each with the
    entry the console's Cancel writes (from the admin); the finished ones stay as they are,
    and the message counts both."""
    admin = _staff("ophelia", "view_job", "change_job")
    assert 'value="cancel_selected"' in admin.get(JOBS).content.decode()
    live = {name: NEW_JOB_IN[name]() for name in ("pending", "blocked", "processing", "retrying")}
    ended = {name: NEW_JOB_IN[name]() for name in ("completed", "cancelled", "dlq")}
    before = {name: job["status"] for name, job in live.items()}

    notes = _cancel(admin, [*live.values(), *ended.values()])

    assert notes == [
        ("success", "Cancelled 4 job(s)."),
        (
            "warning",
            "3 of the 7 selected job(s) could not be cancelled: they had already finished "
            "(completed, cancelled or in the dead-letter queue).",
        ),
    ]
    assert {name: _now(job) for name, job in live.items()} == dict.fromkeys(
        live, (JobStatus.CANCELLED, False)
    )
    assert Job.objects.get(id=live["pending"]["id"]).last_error == "Cancelled from the admin"
    assert [_now(job) for job in ended.values()] == [
        (JobStatus.COMPLETED, False),
        (JobStatus.CANCELLED, False),
        (JobStatus.FAILED, True),
    ]
    # One entry a job, as the console's Cancel writes it, but from the admin.
    login(operator).post(f"/jobs/{state.enqueue('noop', {})['id']}/cancel")
    from_console = AuditEntry.objects.get(source="console", action="cancel")
    entries = AuditEntry.objects.filter(source="admin").order_by("id")
    assert {(e.action, e.target, e.count, (e.before or {})["status"]) for e in entries} == {
        ("cancel", live[name]["id"], 1, status) for name, status in before.items()
    }
    for entry in entries:
        assert (entry.username, entry.summary) == ("ophelia", "Cancelled from the admin")
        assert entry.after == from_console.after == {"status": "cancelled"}
        assert entry.before is not None and from_console.before is not None
        assert entry.before.keys() == from_console.before.keys()
    assert from_console.summary == "Cancelled from the console"


def test_a_job_cancelled_with_the_job_it_waited_on_counts_as_cancelled() -> None:
    admin = _staff("ophelia", "view_job", "change_job")
    upstream = state.enqueue("noop", {})
    waiting = state.enqueue("noop", {}, depends_on=uuid.UUID(upstream["id"]))

    assert _cancel(admin, [upstream, waiting]) == [("success", "Cancelled 2 job(s).")]
    assert _now(waiting) == (JobStatus.CANCELLED, False)


def test_a_selection_of_finished_jobs_cancels_none_and_says_so() -> None:
    admin = _staff("ophelia", "view_job", "change_job")
    done = [NEW_JOB_IN["completed"](), NEW_JOB_IN["dlq"]()]

    assert _cancel(admin, done) == [
        (
            "warning",
            "None of the 2 selected job(s) could be cancelled: they had already finished "
            "(completed, cancelled or in the dead-letter queue).",
        )
    ]
    assert not AuditEntry.objects.exists()


def test_cancel_is_offered_only_to_who_may_change_jobs(superuser_client: Client) -> None:
    """As "Retry selected": `jobs.change_job`. A staff user who may only look sees no such
    action, and posting it by hand cancels nothing. The DLQ, whose jobs a cancel does not
    take, does not offer it either."""
    looker = _staff("lou", "view_job")
    job = state.enqueue("noop", {})
    assert "cancel_selected" not in looker.get(JOBS).content.decode()

    # Django takes an action it does not offer for no action: the list again.
    answer = looker.post(
        JOBS, {"action": "cancel_selected", "index": "0", "_selected_action": [job["id"]]}
    )

    assert answer.status_code == 200
    assert not [m for m in answer.context["messages"] if "Cancelled" in str(m)]
    assert _now(job) == (JobStatus.PENDING, False)
    assert not AuditEntry.objects.exists()
    assert "cancel_selected" not in superuser_client.get(DLQ).content.decode()
    assert 'value="retry_selected"' in superuser_client.get(DLQ).content.decode()


def test_select_all_past_the_bound_cancels_nothing_and_points_to_the_bulk_cancel(
    superuser_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_admin, "CANCEL_AT_ONCE", 2)
    jobs = [state.enqueue("noop", {"n": n}) for n in range(3)]

    notes = _cancel(superuser_client, jobs[:1], select_across="1")

    assert notes == [
        (
            "error",
            "More than 2 jobs selected: the admin cancels at most 2 at once, and none was "
            'cancelled. Narrow the list, or use "Cancel all matching" in the console\'s ledger.',
        )
    ]
    assert [_now(job) for job in jobs] == [(JobStatus.PENDING, False)] * 3
    # Within the bound, "select all" takes every job of the list.
    monkeypatch.setattr(jobs_admin, "CANCEL_AT_ONCE", 3)
    assert _cancel(superuser_client, jobs[:1], select_across="1") == [
        ("success", "Cancelled 3 job(s).")
    ]
