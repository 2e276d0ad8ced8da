"""A cron schedule's transitions against each other and against its running run: pauses and
resumes of one schedule at once take turns (until session 34 two of them could deadlock,
and the operator got a 503); a run that was running when its schedule was paused is not
tried again once it fails or its worker is lost; and a time zone given from Python as a
`ZoneInfo`, as Python code names one, is taken by its name."""

from __future__ import annotations

import signal
import threading
import uuid
from datetime import UTC, datetime, timedelta
from datetime import timezone as fixed_offset
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import transaction
from django.utils import timezone

from jobs import state
from jobs.models import Job, JobAttempt, Schedule, Worker

from .conftest import job_status, wait_for
from .test_schedule_races import due_now, waits_on_a_lock
from .test_state import in_thread, join, new_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

SCHEDULES = "/api/v1/schedules"
PAUSED = "Schedule paused."


def live_runs(schedule_id: str) -> list[Job]:
    return list(
        Job.objects.filter(
            schedule_id=schedule_id, status__in=["pending", "processing", "failed"], in_dlq=False
        )
    )


# --- pause, resume and delete of one schedule at once -----------------------------------------


def test_a_pause_that_waited_for_a_resume_takes_turns_with_a_pause_from_elsewhere(
    operator_client,
):
    """The interleaving a probe found: a resume creates the schedule's run; a pause (the
    admin's, which reads the schedule under its lock before acting) waits for it and then
    holds the schedule without that run; an API pause meanwhile took the run and waited for
    the schedule, and the first pause's cancel of the run closed the circle. Now each
    transition of a schedule waits for the one before it to end."""
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    schedule_id = first["schedule_id"]
    state.pause_schedule(uuid.UUID(schedule_id))
    resumed, resume_goes_on = threading.Event(), threading.Event()
    admin_locked, admin_goes_on = threading.Event(), threading.Event()

    def resume() -> None:
        with transaction.atomic():
            state.resume_schedule(uuid.UUID(schedule_id))
            resumed.set()
            assert resume_goes_on.wait(30)

    def admin_pause() -> None:
        with transaction.atomic():
            state.locked_schedule(uuid.UUID(schedule_id))
            admin_locked.set()
            assert admin_goes_on.wait(30)
            state.pause_schedule(uuid.UUID(schedule_id))

    resume_thread, resume_outcome = in_thread(resume)
    assert resumed.wait(30)
    admin_thread, admin_outcome = in_thread(admin_pause)
    waits_on_a_lock(admin_thread)
    resume_goes_on.set()
    assert admin_locked.wait(30)
    answers: list[Any] = []
    api_thread, api_outcome = in_thread(
        lambda: answers.append(operator_client.post(f"{SCHEDULES}/{schedule_id}/pause"))
    )
    waits_on_a_lock(api_thread)
    admin_goes_on.set()
    join(resume_thread, admin_thread, api_thread)

    assert resume_outcome.error is None, resume_outcome.error
    assert admin_outcome.error is None, admin_outcome.error
    assert api_outcome.error is None, api_outcome.error
    assert answers[0].status_code == 200, answers[0].content[:300]
    assert answers[0].json()["paused"] is True
    (created,) = Job.objects.filter(schedule_id=schedule_id).exclude(id=first["id"])
    assert (created.status, created.last_error) == ("cancelled", PAUSED)
    assert live_runs(schedule_id) == []


def test_pauses_and_resumes_sent_at_once_all_succeed_and_leave_one_state(operator_client):
    # Three resumes and three pauses of one schedule at once, round after round, as from
    # several consoles and scripts: every answer is a 200, and each round ends in a state
    # the schedule can be in: paused with nothing waiting, or running with one run waiting.
    first = state.enqueue("noop", {}, cron="*/5 * * * *")
    schedule_id = first["schedule_id"]
    for _ in range(15):
        start = threading.Barrier(6)
        answers: list[int] = []

        def act(action: str, start: threading.Barrier = start, answers: list[int] = answers):
            start.wait(30)
            answer = operator_client.post(f"{SCHEDULES}/{schedule_id}/{action}")
            answers.append(answer.status_code)

        threads = [in_thread(partial(act, action)) for action in ["resume", "pause"] * 3]
        join(*(thread for thread, _ in threads))
        assert [outcome.error for _, outcome in threads] == [None] * 6
        assert answers == [200] * 6
        paused = Schedule.objects.get(id=schedule_id).paused
        assert len(live_runs(schedule_id)) == (0 if paused else 1)


# --- a run that was running when its schedule was paused ---------------------------------------


def running_run(cron: str = "*/5 * * * *") -> tuple[dict[str, Any], Worker, state.ClaimedJob]:
    """The first run of a schedule, due and claimed by a worker."""
    first = state.enqueue("flaky", {"failure_probability": 1}, cron=cron, max_retries=3)
    worker = new_worker()
    due_now(first["id"])
    (claim,) = state.claim(worker.id, 1, [uuid.UUID(first["id"])])
    return first, worker, claim


def failure(claim: state.ClaimedJob) -> state.Failure:
    return state.Failure(
        claim.id, claim.attempt_id, "HandlerFailure", "boom", None, timedelta(0), timezone.now()
    )


def test_a_run_failing_after_its_schedule_was_paused_is_cancelled_not_retried(events):
    first, _, claim = running_run()
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    # The pause leaves the running run to finish.
    assert job_status(first["id"]) == "processing"

    (failed,) = state.fail([failure(claim)]).failed
    assert failed["id"] == first["id"]
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error, run.next_retry_at) == ("cancelled", PAUSED, None)
    assert run.cancelled_at is not None
    (attempt,) = JobAttempt.objects.filter(job_id=first["id"])
    assert (attempt.status, attempt.error_message) == ("failed", "boom")
    assert state.claim(new_worker().id, 1, [uuid.UUID(first["id"])]) == []
    events.wait_for("job.cancelled", lambda job: job["id"] == first["id"])
    mine = [e["type"] for e in events.drain() if e["data"].get("id") == first["id"]]
    assert mine[-2:] == ["job.failed", "job.cancelled"], mine


def test_a_run_failing_while_its_schedule_runs_still_waits_for_its_retry():
    first, _, claim = running_run()
    (failed,) = state.fail([failure(claim)]).failed
    assert (failed["status"], failed["in_dlq"]) == ("failed", False)
    assert job_status(first["id"]) == "failed"


def test_a_dependent_of_a_run_cancelled_at_its_failure_is_cancelled_with_it():
    first, _, claim = running_run()
    dependent = state.enqueue("noop", {}, depends_on=uuid.UUID(first["id"]))
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    state.fail([failure(claim)])
    assert Job.objects.get(id=dependent["id"]).last_error == (
        f"Upstream job {first['id']} was cancelled"
    )
    assert job_status(dependent["id"]) == "cancelled"


def test_a_lost_run_of_a_paused_schedule_is_cancelled_not_run_again():
    first, worker, _ = running_run()
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    Worker.objects.filter(id=worker.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    (rescued,) = state.rescue_lost(
        stuck_after=timedelta(hours=1), worker_timeout=timedelta(seconds=30)
    )
    assert rescued["id"] == first["id"]
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error) == ("cancelled", PAUSED)
    (attempt,) = JobAttempt.objects.filter(job_id=first["id"])
    assert attempt.error_type == "WorkerLost"


def test_a_released_run_of_a_paused_schedule_is_cancelled_not_run_again():
    first, worker, _ = running_run()
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    state.release(worker.id, "Worker stopped before the job finished.")
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error) == ("cancelled", PAUSED)


def test_a_run_handed_back_unstarted_after_its_schedule_was_paused_is_cancelled():
    first, _, claim = running_run()
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    report = state.hand_back([(claim.id, claim.attempt_id)])
    assert (report.returned, report.refused) == ([], [])
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error) == ("cancelled", PAUSED)


def test_a_failure_racing_a_pause_either_retries_before_it_or_is_cancelled_by_it():
    """The failure holds the run, then reads the schedule (as a completion does); the pause
    waits for the run and then cancels it, waiting for its retry."""
    first, _, claim = running_run()
    holding, go = threading.Event(), threading.Event()

    def fail() -> state.FailureReport:
        with transaction.atomic():
            report = state.fail([failure(claim)])
            holding.set()
            assert go.wait(30)
        return report

    failing, failed = in_thread(fail)
    assert holding.wait(30)
    pausing, paused = in_thread(lambda: state.pause_schedule(uuid.UUID(first["schedule_id"])))
    waits_on_a_lock(pausing)
    go.set()
    join(failing, pausing)
    assert failed.error is None and paused.error is None, (failed.error, paused.error)
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error) == ("cancelled", PAUSED)


# --- the same with a real worker ---------------------------------------------------------------


def started(job_id: str) -> bool:
    return JobAttempt.objects.filter(job_id=job_id).exists()


def test_a_worker_does_not_retry_a_run_whose_schedule_was_paused_while_it_ran(start_worker):
    first = state.enqueue(
        "flaky", {"failure_probability": 1, "sleep_ms": 3000}, cron="*/5 * * * *", max_retries=3
    )
    due_now(first["id"])
    worker = start_worker(env={"SCHEDULER_BACKOFF_BASE_SECONDS": "0.1"})
    wait_for(lambda: started(first["id"]), timeout=60, what="attempt 1 to start")
    state.pause_schedule(uuid.UUID(first["schedule_id"]))

    wait_for(
        lambda: (
            job_status(first["id"]) == "cancelled"
            or JobAttempt.objects.filter(job_id=first["id"]).count() > 1
        ),
        timeout=90,
        what="the run to end or be tried again",
    )
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error, run.attempt_count) == ("cancelled", PAUSED, 1)
    assert JobAttempt.objects.filter(job_id=first["id"]).count() == 1
    # Its log says what became of the run, not a retry that will never come.
    failed_line = wait_for(
        lambda: next(
            (line for line in worker.logs().splitlines() if "attempt 1 of 3" in line), None
        ),
        what="the worker to log the failure",
    )
    assert f"cancelled: {PAUSED}" in failed_line and "retry at" not in failed_line


def test_a_killed_workers_run_of_a_paused_schedule_is_not_run_again(start_worker):
    first = state.enqueue("sleep", {"seconds": 30}, cron="*/5 * * * *", max_retries=3)
    due_now(first["id"])
    doomed = start_worker()
    wait_for(lambda: job_status(first["id"]) == "processing", timeout=60)
    state.pause_schedule(uuid.UUID(first["schedule_id"]))
    doomed.send(signal.SIGKILL)
    doomed.wait()

    start_worker()
    lost = wait_for(
        lambda: JobAttempt.objects.filter(job_id=first["id"], error_type="WorkerLost").first(),
        timeout=90,
        what="the survivor to rescue the run",
    )
    # The rescue and the cancel are one transaction: had the rescue put the run back to
    # pending, the survivor would be running it again.
    run = Job.objects.get(id=first["id"])
    assert (run.status, run.last_error) == ("cancelled", PAUSED)
    assert list(JobAttempt.objects.filter(job_id=first["id"])) == [lost]


# --- a time zone from Python ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "stored"),
    [(ZoneInfo("Europe/Berlin"), "Europe/Berlin"), (UTC, "UTC")],
)
def test_a_zone_given_as_a_python_time_zone_is_stored_by_its_name(zone, stored):
    run = state.enqueue("noop", {}, cron="30 2 * * *", timezone=zone)
    assert Schedule.objects.get(id=run["schedule_id"]).timezone == stored
    slot = run["scheduled_at"]
    local = datetime.fromisoformat(slot).astimezone(ZoneInfo(stored))
    assert (local.hour, local.minute) == (2, 30)


@pytest.mark.parametrize(
    "zone", [fixed_offset(timedelta(hours=2)), 1, ZoneInfo.no_cache("Europe/Berlin").utcoffset]
)
def test_a_zone_that_names_no_iana_zone_is_refused_as_the_timezone(zone):
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", {}, cron="30 2 * * *", timezone=zone)
    assert list(refused.value.details) == ["timezone"]
    assert not Schedule.objects.exists()


def test_a_zone_given_as_a_name_or_a_zoneinfo_is_one_request_under_one_key():
    first = state.enqueue(
        "noop", {}, cron="30 2 * * *", timezone="Europe/Berlin", idempotency_key="k-zone"
    )
    again = state.enqueue(
        "noop", {}, cron="30 2 * * *", timezone=ZoneInfo("Europe/Berlin"), idempotency_key="k-zone"
    )
    assert again["id"] == first["id"]
