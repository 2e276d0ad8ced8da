"""The display-state table (jobs/display.py) against the SQL guards (jobs/sql/queries.sql).

For every display state, a job is brought there through real transitions; every operator
action is then tried on it. The table must allow exactly the actions the guarded
statements let through: a button the console shows must work, and an action it hides must
be refused with the job left as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from jobs import state
from jobs.display import STATES, Action, job_display_state
from jobs.models import Job
from tests.console.helpers import NEW_JOB_IN

pytestmark = pytest.mark.django_db


PERFORM: dict[Action, Callable[[uuid.UUID], object]] = {
    Action.CANCEL: state.cancel,
    Action.RETRY: state.retry_from_dlq,
    Action.PURGE: state.purge,
}


def test_every_display_state_and_action_is_covered() -> None:
    assert set(NEW_JOB_IN) == set(STATES)
    assert set(PERFORM) == set(Action)


@pytest.mark.parametrize("name", list(STATES))
def test_each_state_is_derived_from_the_row_it_stands_for(name: str) -> None:
    job = Job.objects.get(id=NEW_JOB_IN[name]()["id"])
    assert job_display_state(job).name == name


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("name", list(STATES))
def test_the_table_allows_exactly_what_the_sql_guards_let_through(
    name: str, action: Action
) -> None:
    job_id = uuid.UUID(NEW_JOB_IN[name]()["id"])
    before = Job.objects.get(id=job_id)
    try:
        PERFORM[action](job_id)
    except state.InvalidStateError:
        done = False
    else:
        done = True
    assert done is STATES[name].allows(action), (
        f"{action} on a {name} job: the SQL {'allowed' if done else 'refused'} it, "
        f"the display table says {STATES[name].actions}"
    )
    if not done:
        after = Job.objects.get(id=job_id)
        assert job_display_state(after) == job_display_state(before)
        assert after.updated_at == before.updated_at
