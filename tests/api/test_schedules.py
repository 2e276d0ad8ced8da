"""Cron schedules through the API: created by POST /jobs with `cron`, listed with their next
runs, paused and resumed; each slot's run is created once."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import AuditEntry, Job, Schedule, Worker

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db


JOBS = "/api/v1/jobs"
SCHEDULES = "/api/v1/schedules"
NIGHTLY = {"type": "noop", "payload": {}, "priority": 2, "cron": "30 2 * * *"}


def local(value: str, zone: str) -> str:
    return datetime.fromisoformat(value).astimezone(ZoneInfo(zone)).strftime("%H:%M")


def test_a_cron_job_is_a_schedule_whose_first_run_is_its_next_slot(operator_client):
    response = operator_client.post(JOBS, {**NIGHTLY, "timezone": "Europe/Berlin"}, format="json")
    assert response.status_code == 201, response.json()
    run = response.json()
    assert run["schedule_id"] is not None and run["status"] == "pending"
    assert local(run["scheduled_at"], "Europe/Berlin") == "02:30"

    (listed,) = operator_client.get(SCHEDULES).json()["results"]
    assert listed["id"] == run["schedule_id"]
    assert (listed["cron"], listed["timezone"], listed["paused"]) == (
        "30 2 * * *",
        "Europe/Berlin",
        False,
    )
    assert listed["next_runs"][0] == run["scheduled_at"]
    assert len(listed["next_runs"]) == 5
    assert {local(t, "Europe/Berlin") for t in listed["next_runs"]} == {"02:30"}
    assert listed["current_run_id"] == run["id"]
    assert operator_client.get(f"{SCHEDULES}/{listed['id']}").json() == listed
    # Without `cron`, a job object says it belongs to no schedule.
    plain = operator_client.post(
        JOBS, {"type": "noop", "payload": {}, "priority": 2}, format="json"
    )
    assert plain.json()["schedule_id"] is None


def test_the_schema_offers_every_iana_zone_and_a_schedule_takes_each(operator_client):
    """The schema fuzz reads `TimeZone` cut to a few zones; the full list is held here."""
    document = operator_client.get("/api-docs.json").json()
    offered = document["components"]["schemas"]["TimeZone"]["enum"]
    # Every IANA name, not tzdata's `localtime` (the reading machine's own zone).
    assert set(offered) == available_timezones() - {"localtime"}
    for zone in offered:
        response = operator_client.post(JOBS, {**NIGHTLY, "timezone": zone}, format="json")
        assert response.status_code == 201, (zone, response.json())
    assert Schedule.objects.count() == len(offered)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"cron": "every day"}, "cron"),
        ({"timezone": "Berlin"}, "timezone"),
        ({"recur_interval": "every_1_hour"}, "recur_interval"),
        ({"scheduled_at": "2999-01-01T00:00:00Z"}, "scheduled_at"),
    ],
)
def test_a_bad_schedule_is_a_400_naming_the_field(operator_client, extra, field):
    response = operator_client.post(JOBS, {**NIGHTLY, **extra}, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    timezone_alone = {"type": "noop", "payload": {}, "priority": 2, "timezone": "UTC"}
    assert operator_client.post(JOBS, timezone_alone, format="json").status_code == 400
    assert not Schedule.objects.exists()


def test_pause_cancels_the_waiting_run_and_resume_creates_the_next(operator_client, viewer_client):
    run = operator_client.post(JOBS, NIGHTLY, format="json").json()
    schedule = f"{SCHEDULES}/{run['schedule_id']}"
    assert viewer_client.post(f"{schedule}/pause").status_code == 403

    paused = operator_client.post(f"{schedule}/pause")
    assert paused.status_code == 200
    assert (paused.json()["paused"], paused.json()["next_runs"]) == (True, [])
    cancelled = operator_client.get(f"{JOBS}/{run['id']}").json()
    assert (cancelled["status"], cancelled["last_error"]) == ("cancelled", "Schedule paused.")

    resumed = operator_client.post(f"{schedule}/resume").json()
    assert resumed["paused"] is False
    new_run = operator_client.get(f"{JOBS}/{resumed['current_run_id']}").json()
    assert new_run["status"] == "pending" and new_run["id"] != run["id"]
    assert new_run["scheduled_at"] == resumed["next_runs"][0]
    # Resuming again adds nothing: the schedule has its waiting run.
    operator_client.post(f"{schedule}/resume")
    assert Job.objects.filter(schedule_id=run["schedule_id"], status="pending").count() == 1
    # Each is an operator's action in the audit log, as a queue's pause is, naming the runs
    # it cancelled or created; the resume that changed nothing is not.
    entries = AuditEntry.objects.order_by("at", "id")
    assert [(e.action, e.before, e.after) for e in entries] == [
        ("create", None, entries[0].after),
        ("schedule_pause", {"paused": False}, {"paused": True, "runs": [run["id"]]}),
        ("schedule_resume", {"paused": True}, {"paused": False, "runs": [new_run["id"]]}),
    ]
    assert entries[1].target == f"schedule {run['schedule_id']}"

    unknown = operator_client.post(f"{SCHEDULES}/{uuid.uuid4()}/pause")
    assert unknown.status_code == 404
    assert operator_client.post(f"{SCHEDULES}/nope/pause").status_code == 400


def test_an_operator_deletes_a_schedule_and_its_past_runs_stay(
    operator_client, viewer_client, worker
):
    # A schedule made by mistake (a wrong cron, type or payload) could only be paused: it
    # stayed listed, and came back with a resume, for ever.
    first = operator_client.post(JOBS, {**NIGHTLY, "cron": "*/5 * * * *"}, format="json").json()
    (waiting,) = complete(worker, first["id"]).created
    schedule = f"{SCHEDULES}/{first['schedule_id']}"
    assert viewer_client.delete(schedule).status_code == 403

    assert operator_client.delete(schedule).status_code == 204
    assert_error(operator_client.get(schedule), 404, "not_found")
    assert operator_client.get(SCHEDULES).json()["results"] == []
    # Its waiting run is cancelled, saying why; the run it completed stays in the history.
    cancelled = operator_client.get(f"{JOBS}/{waiting['id']}").json()
    assert (cancelled["status"], cancelled["last_error"]) == ("cancelled", "Schedule deleted.")
    done = operator_client.get(f"{JOBS}/{first['id']}").json()
    assert (done["status"], done["schedule_id"]) == ("completed", None)
    assert_error(operator_client.delete(schedule), 404, "not_found")
    entry = AuditEntry.objects.get(action="schedule_delete")
    assert entry.target == f"schedule {first['schedule_id']}"


def claim_now(worker: Worker, job_id: str) -> state.ClaimedJob:
    """Claim a run before its slot (the database clock stands at the test's start)."""
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(minutes=1))
    (claimed,) = state.claim(worker.id, 1, [uuid.UUID(job_id)])
    return claimed


def complete(worker: Worker, job_id: str) -> state.CompletionReport:
    claimed = claim_now(worker, job_id)
    success = state.Success(claimed.id, claimed.attempt_id, None, timezone.now())
    return state.complete([success, success], worker.id)


def test_completing_a_run_creates_the_next_slot_once(worker):
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    report = complete(worker, first["id"])
    (second,) = report.created
    assert second["schedule_id"] == first["schedule_id"]
    slot = datetime.fromisoformat(second["scheduled_at"])
    assert slot.minute % 5 == 0 and slot > datetime.fromisoformat(first["scheduled_at"])
    assert Job.objects.filter(schedule_id=first["schedule_id"]).count() == 2


def test_every_run_of_a_schedule_waits_in_its_queue(worker):
    first = state.enqueue("noop", {}, cron="*/5 * * * *", queue="nightly")
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    state.resume_schedule(uuid.UUID(first["schedule_id"]))
    resumed = Job.objects.get(schedule_id=first["schedule_id"], status="pending")
    (next_run,) = complete(worker, str(resumed.id)).created
    assert (first["queue"], resumed.queue, next_run["queue"]) == ("nightly",) * 3


@pytest.mark.parametrize(
    ("stop", "schedules_left"), [(state.pause_schedule, 1), (state.delete_schedule, 0)]
)
def test_a_run_completing_after_a_pause_or_a_deletion_creates_no_next_run(
    worker, stop, schedules_left
):
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    claimed = claim_now(worker, first["id"])
    stop(uuid.UUID(first["schedule_id"]))
    success = state.Success(claimed.id, claimed.attempt_id, None, timezone.now())
    report = state.complete([success], worker.id)
    assert [j["status"] for j in report.completed] == ["completed"]
    assert report.created == []
    assert Schedule.objects.count() == schedules_left


def test_a_missed_run_runs_once_and_the_next_is_the_first_slot_from_now(worker):
    first = state.enqueue("noop", {}, cron="0 * * * *")
    # The worker was away for three days: the waiting run's slot is long past.
    three_days_ago = timezone.now() - timedelta(days=3)
    Job.objects.filter(id=first["id"]).update(scheduled_at=three_days_ago, run_at=three_days_ago)
    (second,) = complete(worker, first["id"]).created
    next_slot = datetime.fromisoformat(second["scheduled_at"])
    assert timezone.now() < next_slot <= timezone.now() + timedelta(hours=1)
    assert Job.objects.filter(schedule_id=first["schedule_id"]).count() == 2


@pytest.mark.parametrize("running", [False, True], ids=["waiting", "running"])
def test_cancelling_a_run_skips_its_slot_and_the_series_goes_on(operator_client, worker, running):
    # Before, a cancelled run was the schedule's last: nothing made the next one, while the
    # schedule still showed itself active with its next runs.
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    schedule = f"{SCHEDULES}/{first['schedule_id']}"
    if running:
        claim_now(worker, first["id"])
    assert operator_client.post(f"{JOBS}/{first['id']}/cancel").json()["status"] == "cancelled"
    listed = operator_client.get(schedule).json()
    following = operator_client.get(f"{JOBS}/{listed['current_run_id']}").json()
    assert (following["status"], following["scheduled_at"]) == ("pending", listed["next_runs"][0])
    assert following["id"] != first["id"]
    # The cancelled slot is skipped: a waiting run's next slot after now was its own, and a
    # run of that slot was created again, as often as it was cancelled.
    skipped = datetime.fromisoformat(first["scheduled_at"])
    assert datetime.fromisoformat(following["scheduled_at"]) > skipped
    assert not Job.objects.filter(schedule_id=first["schedule_id"], status="pending").exclude(
        scheduled_at__gt=skipped
    )


def test_cancelling_the_running_run_of_a_paused_schedule_starts_no_other(operator_client, worker):
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    claim_now(worker, first["id"])
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    operator_client.post(f"{JOBS}/{first['id']}/cancel")
    assert not Job.objects.filter(schedule_id=first["schedule_id"], status="pending").exists()
