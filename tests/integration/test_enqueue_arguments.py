"""`jobs.state.enqueue()` and `enqueue_many()` from Python: every wrong argument of a job is
a JobValidationError naming its field, as the HTTP API's 400 names it, never a TypeError or a
database error; a wrong argument of the call itself is a TypeError or ValueError saying so.
No job is written."""

from __future__ import annotations

import decimal
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobs import state
from jobs.models import Job

pytestmark = pytest.mark.django_db

LATER = datetime(2030, 1, 1, 9, 0)


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"payload": {"ratio": float("nan")}}, "payload", "payload.ratio is nan"),
        ({"payload": {"limit": float("inf")}}, "payload", "payload.limit is inf"),
        ({"payload": {"at": LATER}}, "payload", "payload.at is a Python datetime"),
        ({"payload": {"amount": decimal.Decimal("1.5")}}, "payload", "is a Python Decimal"),
        ({"payload": {"ids": (uuid.uuid4(),)}}, "payload", "payload.ids[0] is a Python UUID"),
        ({"scheduled_at": LATER}, "scheduled_at", "Must be timezone-aware"),
        ({"scheduled_at": "2030-01-01T09:00:00Z"}, "scheduled_at", "Must be a datetime"),
        ({"depends_on": "not-a-job-id"}, "depends_on", "Not a job id: 'not-a-job-id'"),
        ({"depends_on": [uuid.uuid4(), 42]}, "depends_on", "Not a job id: 42"),
        ({"max_retries": "3"}, "max_retries", "Must be an integer from 1 to 10"),
        ({"max_retries": 2.5}, "max_retries", "Must be an integer from 1 to 10"),
        ({"queue": 7}, "queue", "A queue name is"),
        ({"queue": "emails\n"}, "queue", "A queue name is"),
        ({"recur_interval": 60}, "recur_interval", "Must be one of"),
        ({"cron": 5}, "cron", "Must have 5 fields"),
        ({"cron": "0 9 * * *", "timezone": 1}, "timezone", "Unknown time zone"),
        ({"idempotency_key": 5}, "idempotency_key", "Must be 1 to 255 printable ASCII"),
        # Each of these passed the checks, then failed in SQL or in len() (a TypeError).
        ({"priority": 1.0}, "priority", "Must be 1, 2 or 3"),
        ({"depends_on": 5}, "depends_on", "List 1 to 1000 job ids"),
        ({"depends_on": (str(uuid.uuid4()) for _ in range(2))}, "depends_on", "List 1 to"),
        # Written with the year 9999, in UTC as anywhere.
        ({"scheduled_at": datetime(9999, 1, 1, 9, tzinfo=UTC)}, "scheduled_at", "year from"),
    ],
)
def test_a_wrong_argument_is_a_validation_error_naming_its_field(arguments, field, message):
    given = {"payload": {}, **arguments}
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", **given)
    assert field in refused.value.details, refused.value.details
    assert any(message in line for line in refused.value.details[field]), refused.value.details
    assert not Job.objects.exists()


def test_a_float_priority_in_a_batch_is_refused_before_anything_is_written():
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue_many([state.JobSpec("noop", {}), state.JobSpec("noop", {}, priority=1.0)])
    assert refused.value.details == {"1.priority": ["Must be 1, 2 or 3."]}
    assert not Job.objects.exists()


def test_the_last_year_is_taken_in_any_offset():
    last = datetime(9998, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-12)))
    job = state.enqueue("noop", {}, scheduled_at=last)
    assert Job.objects.get(id=job["id"]).scheduled_at == last


def test_an_aware_scheduled_at_in_any_zone_is_taken():
    paris = datetime(2030, 1, 1, 9, 0).astimezone().tzinfo
    job = state.enqueue("noop", {}, scheduled_at=LATER.replace(tzinfo=paris) + timedelta(hours=1))
    assert Job.objects.get(id=job["id"]).scheduled_at == LATER.replace(tzinfo=paris) + timedelta(
        hours=1
    )


@pytest.mark.parametrize(
    ("specs", "options", "error", "message"),
    [
        ([{"type": "noop", "payload": {}}], {}, TypeError, "item 0 is a dict, not a JobSpec"),
        ("noop", {}, TypeError, "item 0 is a str, not a JobSpec"),
        ([state.JobSpec("noop", {})], {"batch_size": 0}, ValueError, "got 0"),
        ([state.JobSpec("noop", {})], {"batch_size": -1}, ValueError, "got -1"),
        ([state.JobSpec("noop", {})], {"batch_size": 2.5}, ValueError, "got 2.5"),
    ],
)
def test_enqueue_many_refuses_what_it_cannot_take_and_writes_nothing(
    specs, options, error, message
):
    # Not a job's fields but the call's own: a batch size that wrote nothing and said nothing
    # (-1) or failed deep inside (0, 2.5), items that are not JobSpecs.
    with pytest.raises(error, match=re.escape(message)):
        state.enqueue_many(specs, **options)
    assert not Job.objects.exists()
