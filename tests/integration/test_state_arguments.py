"""`jobs.state` from Python: an argument of a job that no rule foresaw is still refused as a
JobValidationError naming its field, never a TypeError of a lookup or the database's error
on a column it does not fit."""

from __future__ import annotations

import pytest

from jobs import state
from jobs.models import Job, Schedule

pytestmark = pytest.mark.django_db

# Valid, and longer than the 200 characters a schedule's `cron` holds.
LONG_CRON = f"{','.join(map(str, range(60)))} {','.join(map(str, range(24)))} * * *"


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"type": ["noop"]}, "type", "A job type's name is a string of 1 to 100 characters."),
        ({"type": {"name": "noop"}}, "type", "A job type's name is a string of 1 to 100"),
        ({"cron": "0 4 * * *", "timezone": ["UTC"]}, "timezone", "Unknown time zone"),
        ({"cron": LONG_CRON}, "cron", "Must be at most 200 characters."),
    ],
)
def test_a_job_that_cannot_be_stored_is_a_validation_error(arguments, field, message):
    given = {"type": "noop", "payload": {}, **arguments}
    for call in (
        lambda: state.enqueue(**given),
        lambda: state.enqueue_many([state.JobSpec(**given)]),
    ):
        with pytest.raises(state.JobValidationError) as refused:
            call()
        (messages,) = (v for k, v in refused.value.details.items() if k.endswith(field))
        assert any(message in line for line in messages), refused.value.details
    assert not Job.objects.exists()
    assert not Schedule.objects.exists()
