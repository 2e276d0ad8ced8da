"""The invariant checker of `make faults` (tests/faults/checks.py) tells a run that held from
one that broke: a second run of a handler is allowed only in a named at-least-once case."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs import state
from jobs.models import Worker
from tests.faults import suite
from tests.faults.checks import FENCED, KILLED, Window, check
from tests.faults.load import Answer

pytestmark = pytest.mark.django_db(transaction=True)


def make_worker() -> Worker:
    now = timezone.now()
    return Worker.objects.create(hostname="test", pid=1, started_at=now, heartbeat_at=now)


def run_twice(effects: Path) -> str:
    """A job whose first worker went silent after its handler finished; another ran it again."""
    lost, second = make_worker(), make_worker()
    job = state.enqueue("noop", {})
    (first,) = state.claim(lost.id, 1, [uuid.UUID(job["id"])])
    Worker.objects.filter(id=lost.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    state.rescue_lost(stuck_after=timedelta(hours=2), worker_timeout=timedelta(minutes=1))
    (again,) = state.claim(second.id, 1, [uuid.UUID(job["id"])])
    state.complete([state.Success(again.id, again.attempt_id, None, timezone.now())])
    with effects.open("a") as lines:
        lines.write(f"{job['id']} {first.attempt_id}\n{job['id']} {again.attempt_id}\n")
    return str(lost.id)


def test_a_second_run_is_allowed_only_for_a_killed_or_fenced_worker(tmp_path):
    effects = tmp_path / "effects"
    lost_worker = run_twice(effects)
    window = Window("fault", database_down=False, start=0)

    for killed, fenced, excuse in ((lost_worker, "", KILLED), ("", lost_worker, FENCED)):
        (row,) = check([window], [], effects, killed={killed}, fenced={fenced}).rows
        assert (row.jobs, row.once, row.again, row.twice) == (1, 0, {excuse: 1}, 0)
        assert row.holds

    # The same second run by a worker that was neither killed nor cut off: the outage bug.
    (row,) = check([window], [], effects, killed=set(), fenced=set()).rows
    assert (row.once, row.twice, row.holds) == (0, 1, False)


def test_a_completed_job_without_its_side_effect_and_an_unfinished_job_break_it(tmp_path):
    done = state.enqueue("noop", {})
    (claimed,) = state.claim(make_worker().id, 1, [uuid.UUID(done["id"])])
    state.complete([state.Success(claimed.id, claimed.attempt_id, None, timezone.now())])
    state.enqueue("noop", {})
    window = Window("fault", database_down=False, start=0)

    report = check([window], [], tmp_path / "effects", killed=set(), fenced=set())
    (row,) = report.rows
    assert (row.jobs, row.twice, row.unfinished, report.holds) == (2, 1, 1, False)


def test_503_is_right_only_while_the_database_is_down_and_500_never(tmp_path):
    now = time.time()
    windows = [
        Window("redis down", database_down=False, start=now - 20, end=now - 10),
        Window("database down", database_down=True, start=now - 10),
    ]
    answers = [
        Answer(now - 15, "POST", 201, False, None),
        Answer(now - 15, "POST", 503, True, None),
        Answer(now - 5, "POST", 503, True, None),
        Answer(now - 5, "POST", 503, False, None),
        Answer(now - 5, "GET", 500, False, None),
        Answer(now - 5, "GET", 0, False, None),
    ]
    redis_row, database_row = check(
        windows, answers, tmp_path / "effects", killed=set(), fenced=set()
    ).rows
    assert (redis_row.ok, redis_row.unavailable, dict(redis_row.wrong)) == (1, 0, {"503": 1})
    assert database_row.unavailable == 1
    assert dict(database_row.wrong) == {"503 without Retry-After": 1, "500": 1, "no answer": 1}
    assert not redis_row.holds and not database_row.holds


def test_the_suite_stops_and_starts_only_servers_of_its_own():
    faults = suite.Suite()
    assert faults.postgres.directory == suite.DATA / "postgres"
    assert faults.redis.directory == suite.DATA / "redis"
    # Unix sockets inside its own directory: never the machine's 127.0.0.1:5432 or :6379.
    assert "127.0.0.1" not in faults.postgres.url_for(suite.DATABASE)
    assert "127.0.0.1" not in faults.redis.url
