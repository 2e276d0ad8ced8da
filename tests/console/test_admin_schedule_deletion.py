"""The schedules admin's "Delete selected" asks first, as Django's own delete_selected and
the DLQ's purge do: deleting a schedule ends its series and cancels its waiting run, and
the action deleted at once. Its confirmation confirms the schedules it listed."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest
from django.test import Client

from jobs import admin as jobs_admin
from jobs import state
from jobs.models import AuditEntry, Job, JobStatus, Schedule

from .test_admin import hidden_fields
from .test_admin_probe import notes_after

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULES = "/admin/jobs/schedule/"
DELETE = "delete_selected_schedules"


def _schedule(job_type: str = "noop", cron: str = "0 6 * * *") -> tuple[Schedule, dict[str, Any]]:
    """A schedule and its waiting run."""
    run = state.enqueue(job_type, {}, cron=cron)
    return Schedule.objects.get(id=run["schedule_id"]), run


def _delete(client: Client, schedules: list[Schedule], **extra: Any) -> Any:
    """The action "Delete selected" with `schedules` ticked on the list, as its form posts
    it."""
    form = hidden_fields(client.get(SCHEDULES).content.decode())
    return client.post(
        SCHEDULES,
        {
            **form,
            "action": DELETE,
            "index": "0",
            "_selected_action": [str(s.id) for s in schedules],
            **extra,
        },
    )


def _left(schedules: list[Schedule]) -> int:
    return Schedule.objects.filter(id__in=[s.id for s in schedules]).count()


def test_delete_selected_lists_the_schedules_and_deletes_only_at_the_yes(
    admin_browser: Client,
) -> None:
    (daily, daily_run), (hourly, hourly_run) = _schedule(), _schedule("noop", "15 * * * *")
    kept, _ = _schedule()

    confirm = _delete(admin_browser, [daily, hourly])

    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Delete schedules?" in page
    for schedule, run in ((daily, daily_run), (hourly, hourly_run)):
        assert f"{schedule.type} {schedule.cron} ({schedule.timezone})" in page
        assert datetime.fromisoformat(run["scheduled_at"]).isoformat() in page  # next run
    assert "0 6 * * *" in page and "15 * * * *" in page
    assert "Their waiting runs will be cancelled" in page
    assert "Yes, delete 2 schedules" in page
    assert sorted(hidden_fields(page)["_selected_action"]) == sorted(
        [str(daily.id), str(hourly.id)]
    )
    # Nothing happens before the yes.
    assert _left([daily, hourly]) == 2
    assert Job.objects.get(id=daily_run["id"]).status == JobStatus.PENDING
    assert not AuditEntry.objects.filter(action="schedule_delete").exists()

    done = admin_browser.post(SCHEDULES, hidden_fields(page))

    assert notes_after(admin_browser, done) == [
        ("success", "Deleted 2 schedule(s): their waiting runs were cancelled."),
    ]
    assert _left([daily, hourly, kept]) == 1
    runs = Job.objects.filter(id__in=[daily_run["id"], hourly_run["id"]])
    assert {run.status for run in runs} == {JobStatus.CANCELLED}
    assert AuditEntry.objects.filter(action="schedule_delete").count() == 2


def test_deleting_all_matching_deletes_the_schedules_listed_not_those_made_since(
    admin_browser: Client,
) -> None:
    listed = [_schedule()[0] for _ in range(3)]
    form = hidden_fields(admin_browser.get(SCHEDULES).content.decode())
    confirm = admin_browser.post(
        SCHEDULES,
        {
            **form,
            "action": DELETE,
            "index": "0",
            "select_across": "1",
            "_selected_action": [str(listed[0].id)],
        },
    )
    page = confirm.content.decode()
    assert "Yes, delete 3 schedules" in page
    newer = _schedule()[0]  # while the operator reads the page

    done = admin_browser.post(SCHEDULES, hidden_fields(page))

    assert notes_after(admin_browser, done) == [
        ("success", "Deleted 3 schedule(s): their waiting runs were cancelled."),
    ]
    assert _left(listed) == 0
    assert _left([newer]) == 1


def test_a_delete_yes_that_confirms_no_list_asks_again(admin_browser: Client) -> None:
    schedules = [_schedule()[0] for _ in range(2)]

    again = _delete(admin_browser, schedules[:1], select_across="1", post="yes")

    assert again.status_code == 200
    assert "Yes, delete 2 schedules" in again.content.decode()
    assert _left(schedules) == 2


def test_deleting_more_than_the_admin_confirms_at_once_deletes_nothing_and_says_so(
    admin_browser: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_admin, "CONFIRM_AT_ONCE", 2)
    schedules = [_schedule()[0] for _ in range(3)]

    refused = _delete(admin_browser, schedules)

    assert notes_after(admin_browser, refused) == [
        (
            "error",
            "More than 2 schedules selected: the admin deletes at most 2 at once, and none "
            "was deleted. Narrow the list (its filters), then delete them in turns.",
        )
    ]
    assert _left(schedules) == 3


def test_schedules_deleted_elsewhere_are_left_out_of_the_page_and_named_after_the_yes(
    admin_browser: Client,
) -> None:
    gone, stays, late = _schedule()[0], _schedule()[0], _schedule()[0]
    state.delete_schedule(gone.id)  # from the console, since they were ticked

    page = _delete(admin_browser, [gone, stays, late]).content.decode()

    assert "Yes, delete 2 schedules" in page
    assert "1 of the 3 selected schedules had been deleted elsewhere since" in page
    assert str(gone.id) not in page
    state.delete_schedule(late.id)  # while the page is read
    done = admin_browser.post(SCHEDULES, hidden_fields(page))
    assert notes_after(admin_browser, done) == [
        ("success", "Deleted 1 schedule(s): their waiting runs were cancelled."),
        (
            "warning",
            "1 of the 2 selected schedule(s) had been deleted elsewhere since: not deleted.",
        ),
    ]
    assert _left([stays]) == 0


def test_schedules_all_deleted_elsewhere_ask_nothing(admin_browser: Client) -> None:
    gone = _schedule()[0]
    state.delete_schedule(gone.id)

    refused = _delete(admin_browser, [gone])

    assert notes_after(admin_browser, refused) == [
        (
            "warning",
            "The 1 selected schedule(s) had been deleted elsewhere since: none was deleted.",
        )
    ]


def test_a_paused_or_held_schedule_is_listed_with_why_it_has_no_next_run(
    admin_browser: Client,
) -> None:
    paused = _schedule()[0]
    state.pause_schedule(paused.id)

    page = _delete(admin_browser, [paused]).content.decode()

    assert f"noop 0 6 * * * ({paused.timezone})</a>: next run paused" in page
    assert "Its waiting run will be cancelled" in page
    assert 'value="Yes, delete 1 schedule"' in page
    assert uuid.UUID(hidden_fields(page)["_selected_action"][0]) == paused.id


@pytest.mark.parametrize(
    ("name", "verb"),
    [(DELETE, "deleted"), ("pause_selected", "paused"), ("resume_selected", "resumed")],
)
def test_select_all_over_a_list_that_matches_none_any_more_says_so(
    admin_browser: Client, name: str, verb: str
) -> None:
    """A "select all" ticked on a page of paused schedules, all resumed elsewhere since: the
    admin said "The 0 selected schedule(s) were already paused: nothing changed."."""
    schedule = _schedule()[0]
    state.pause_schedule(schedule.id)
    url = SCHEDULES + "?paused__exact=1"
    form = hidden_fields(admin_browser.get(url).content.decode())
    state.resume_schedule(schedule.id)

    response = admin_browser.post(
        url,
        {
            **form,
            "action": name,
            "index": "0",
            "select_across": "1",
            "_selected_action": [str(schedule.id)],
        },
    )

    assert notes_after(admin_browser, response) == [
        ("warning", f"No schedule matches any more: none was {verb}."),
    ]
    assert _left([schedule]) == 1
