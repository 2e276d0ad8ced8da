"""Four things a probe of the admin found: "Purge selected" over "select all" purged what
matched at the "yes", not what the confirmation listed; job types no handler of the web
process registers could be neither searched nor picked in the type filter; a pause or
resume of schedules that were so already claimed it changed them; and a limit whose number
was refused was also told to give a number."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs import admin as jobs_admin
from jobs import state
from jobs.models import AuditEntry, Job, Limit, Schedule, Worker
from jobs.registry import registry
from tests.integration.test_schedules_probe import fail_before_its_slot

from .test_admin import DLQ, JOBS, hidden_fields, to_dlq
from .test_admin_probe import notes_after, tick

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULES = "/admin/jobs/schedule/"


@pytest.fixture
def worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="node-1", pid=4242, started_at=now, heartbeat_at=now)


# --- "Purge selected" purges what its confirmation listed -------------------------------------


def _select_all(admin_browser: Client, url: str, name: str, shown: list[Job]) -> Any:
    """The action `name` with "Select all N" ticked on the list at `url`, where `shown` are
    the rows of its page."""
    form = hidden_fields(admin_browser.get(url).content.decode())
    return admin_browser.post(
        url,
        {
            **form,
            "action": name,
            "index": "0",
            "select_across": "1",
            "_selected_action": [str(job.pk) for job in shown],
        },
    )


def _in_dlq(jobs: list[Job]) -> int:
    return Job.objects.filter(id__in=[job.id for job in jobs], in_dlq=True).count()


@pytest.mark.parametrize("url", [DLQ, DLQ + "?type=flaky"])
def test_purge_of_all_matching_purges_the_jobs_confirmed_not_those_that_arrived_since(
    admin_browser: Client, worker: Worker, url: str
) -> None:
    """The confirmation re-posted "select all", so the "yes" purged whatever matched at
    that moment: 5 listed, 4 more dead meanwhile, "Purged 9"."""
    confirmed = [to_dlq(worker, "flaky") for _ in range(5)]

    confirm = _select_all(admin_browser, url, "purge_selected", confirmed)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Yes, purge 5 jobs" in page
    newer = [to_dlq(worker, "flaky") for _ in range(4)]  # while the operator reads it
    done = admin_browser.post(url, hidden_fields(page))

    assert notes_after(admin_browser, done) == [
        ("success", "Purged 5 job(s) with their attempts and logs."),
    ]
    assert not Job.objects.filter(id__in=[job.id for job in confirmed]).exists()
    assert _in_dlq(newer) == 4
    (entry,) = AuditEntry.objects.filter(action="purge")
    assert entry.count == 5


def test_purge_of_all_matching_names_the_confirmed_jobs_that_left_meanwhile(
    admin_browser: Client, worker: Worker
) -> None:
    confirmed = [to_dlq(worker) for _ in range(3)]
    page = _select_all(admin_browser, DLQ, "purge_selected", confirmed).content.decode()
    assert "Yes, purge 3 jobs" in page
    state.retry_many_from_dlq([confirmed[0].id])  # from the console, meanwhile
    newer = to_dlq(worker)

    done = admin_browser.post(DLQ, hidden_fields(page))

    assert notes_after(admin_browser, done) == [
        ("success", "Purged 2 job(s) with their attempts and logs."),
        (
            "warning",
            "1 of the 3 selected job(s) had already left the DLQ (retried or purged "
            "elsewhere): not purged.",
        ),
    ]
    assert _in_dlq([newer]) == 1


def test_a_purge_yes_that_confirms_no_list_asks_again(
    admin_browser: Client, worker: Worker
) -> None:
    """A "yes" carrying "select all" rather than the jobs confirmed (a confirmation page
    of the release before, a form made by hand) says nothing of what the operator read: it
    is asked again, with the count taken now."""
    jobs = [to_dlq(worker) for _ in range(2)]
    form = hidden_fields(admin_browser.get(DLQ).content.decode())

    again = admin_browser.post(
        DLQ,
        {
            **form,
            "action": "purge_selected",
            "select_across": "1",
            "_selected_action": [str(jobs[0].pk)],
            "post": "yes",
        },
    )

    assert again.status_code == 200
    assert "Yes, purge 2 jobs" in again.content.decode()
    assert _in_dlq(jobs) == 2


def test_select_all_past_the_bound_purges_nothing_and_points_to_the_console(
    admin_browser: Client, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The confirmation posts back each job it lists: past CONFIRM_AT_ONCE the admin asks
    nothing and says where the rest can be purged."""
    monkeypatch.setattr(jobs_admin, "CONFIRM_AT_ONCE", 2)
    jobs = [to_dlq(worker) for _ in range(3)]

    refused = _select_all(admin_browser, DLQ, "purge_selected", jobs)

    assert notes_after(admin_browser, refused) == [
        (
            "error",
            "More than 2 jobs selected: the admin purges at most 2 at once, and none was "
            'purged. Narrow the list, or use "Purge all matching" in the console\'s '
            "dead-letter queue.",
        )
    ]
    assert _in_dlq(jobs) == 3


# --- job types the web process has no handler for --------------------------------------------


@pytest.fixture
def task_jobs() -> Iterator[list[uuid.UUID]]:
    """Jobs of a Django task's type and of a type a deploy removed: types that stored jobs
    have, though no handler of this process registers them."""
    made = []
    for name in ("myapp.tasks.add", "retired_report"):
        registry.register(name)(lambda payload: None)
        try:
            made.append(uuid.UUID(state.enqueue(name, {})["id"]))
        finally:
            registry.unregister(name)
    yield made


def _listed(client: Client, query: str) -> set[uuid.UUID]:
    response = client.get(JOBS + query)
    assert response.status_code == 200
    return {job.id for job in response.context["cl"].result_list}


def test_jobs_of_a_type_this_process_does_not_register_are_searched_and_filtered(
    superuser_client: Client, task_jobs: list[uuid.UUID]
) -> None:
    task_job, retired_job = task_jobs
    state.enqueue("noop", {})

    assert _listed(superuser_client, "?q=myapp.tasks") == {task_job}
    assert _listed(superuser_client, "?q=MyApp.Tasks.ADD") == {task_job}
    assert _listed(superuser_client, "?q=retired") == {retired_job}
    page = superuser_client.get(JOBS).content.decode()
    # The type filter offers them, as it offers the registered types that have jobs.
    for name in ("myapp.tasks.add", "retired_report", "noop"):
        assert f'href="?type={name}"' in page, name
    assert _listed(superuser_client, "?type=myapp.tasks.add") == {task_job}


# --- pause and resume say what they changed --------------------------------------------------


def _schedule() -> Schedule:
    return Schedule.objects.get(id=state.enqueue("noop", {}, cron="0 6 * * *")["schedule_id"])


def _act(client: Client, name: str, schedules: list[Schedule]) -> list[tuple[str, str]]:
    return notes_after(client, tick(client, SCHEDULES, name, [str(s.id) for s in schedules]))


def test_pausing_paused_schedules_says_they_were_paused_already(
    superuser_client: Client,
) -> None:
    first, second, third = _schedule(), _schedule(), _schedule()
    state.pause_schedule(first.id)  # from the console, earlier

    assert _act(superuser_client, "pause_selected", [first, second, third]) == [
        ("success", "Paused 2 schedule(s): their waiting runs were cancelled."),
        ("info", "1 of the 3 selected schedule(s) was already paused: left as it was."),
    ]
    assert _act(superuser_client, "pause_selected", [first, second]) == [
        ("info", "The 2 selected schedule(s) were already paused: nothing changed."),
    ]
    paused = AuditEntry.objects.filter(action="schedule_pause")
    assert sorted(e.target for e in paused) == sorted(f"schedule {s.id}" for s in (second, third))


def test_resuming_running_schedules_says_they_were_running_already(
    superuser_client: Client,
) -> None:
    paused, running, gone = _schedule(), _schedule(), _schedule()
    state.pause_schedule(paused.id)
    state.delete_schedule(gone.id)

    assert _act(superuser_client, "resume_selected", [paused, running, gone]) == [
        ("success", "Resumed 1 schedule(s) from their next slot."),
        ("info", "1 of the 3 selected schedule(s) was already running: left as it was."),
        (
            "warning",
            "1 of the 3 selected schedule(s) had been deleted elsewhere since: not resumed.",
        ),
    ]
    assert _act(superuser_client, "resume_selected", [paused]) == [
        ("info", "The 1 selected schedule(s) was already running: nothing changed."),
    ]
    (resumed,) = AuditEntry.objects.filter(action="schedule_resume")
    assert resumed.target == f"schedule {paused.id}"


def test_resuming_a_schedule_whose_series_stopped_counts_as_resumed(
    superuser_client: Client,
) -> None:
    """A running schedule whose last run was purged from the DLQ goes on when resumed: that
    changed it (a run was created, and the audit log says so), unlike resuming one that
    runs."""
    run = state.enqueue("noop", {}, cron="0 6 * * *", max_retries=1)
    held = Schedule.objects.get(id=run["schedule_id"])
    assert fail_before_its_slot(run["id"])["in_dlq"]
    state.purge(uuid.UUID(run["id"]))
    running = _schedule()

    assert _act(superuser_client, "resume_selected", [held, running]) == [
        ("success", "Resumed 1 schedule(s) from their next slot."),
        ("info", "1 of the 2 selected schedule(s) was already running: left as it was."),
    ]
    (resumed,) = AuditEntry.objects.filter(action="schedule_resume")
    assert resumed.target == f"schedule {held.id}"


# --- a limit's number refused is not also missing -------------------------------------------


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"max_running": "-1"}, "max_running"),
        ({"max_starts": "-1", "period_seconds": "60"}, "max_starts"),
        ({"max_running": "2", "max_starts": "x", "period_seconds": "60"}, "max_starts"),
    ],
)
def test_a_limit_number_refused_by_its_field_is_not_also_called_missing(
    superuser_client: Client, given: dict[str, str], field: str
) -> None:
    response = superuser_client.post(
        "/admin/jobs/limit/add/", {"scope": "queue", "name": "emails", **given}
    )

    assert response.status_code == 200
    form = response.context["adminform"].form
    own = "Enter a whole number." if given[field] == "x" else None
    assert form.errors == {
        field: [own or "Ensure this value is greater than or equal to 0."],
    }
    page = response.content.decode()
    assert "Give max_running, max_starts, or both." not in page
    assert "go together" not in page
    assert not Limit.objects.exists()
