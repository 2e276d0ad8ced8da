"""The benchmark's workload end to end at a tiny size, on the bare-SQL floor: every measure
runs against a real worker process and returns figures that make sense (none is timed)."""

from __future__ import annotations

import pytest
from django.conf import settings

from benchmarks.floor import Floor
from benchmarks.workload import SINGLE_ENQUEUE_ROUNDS, Sizes, measure, single_enqueue_in_turns

pytestmark = [pytest.mark.slow]

SIZES = Sizes(enqueue=30, batch=200, drain=400, probes=5, seconds=30.0)


def test_the_workload_measures_the_floor_through_its_worker(subprocess_env: dict[str, str]) -> None:
    floor = Floor(subprocess_env["DATABASE_URL"], settings.REDIS_URL)
    try:
        rows = measure(floor, SIZES, {"floor": "defaults", "floor again": "defaults"})
        assert floor.finished() == 0  # measure leaves no jobs behind
    finally:
        with floor.connection.transaction():
            floor.connection.execute("DROP TABLE bench_floor_jobs")
        floor.connection.close()

    first, second = rows["floor"], rows["floor again"]
    assert first["single_enqueue"] > 0 and first["batch_enqueue"] > 0
    # Enqueue figures do not depend on the worker: only the first row has them.
    assert "single_enqueue" not in second and "batch_enqueue" not in second
    for row in (first, second):
        assert row["drain"] > 0
        latency = row["latency"]
        assert latency["probes"] == SIZES.probes
        assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]


class LoggedFloor(Floor):
    """The floor, noting each enqueue under its label in a shared log."""

    def __init__(self, label: str, log: list[str], database_url: str) -> None:
        super().__init__(database_url, settings.REDIS_URL)
        self.label, self.log = label, log

    def enqueue_one(self) -> None:
        super().enqueue_one()
        self.log.append(self.label)


def test_single_enqueues_take_turns_in_rounds_and_each_gets_its_median_rate(
    subprocess_env: dict[str, str],
) -> None:
    log: list[str] = []
    first = LoggedFloor("first", log, subprocess_env["DATABASE_URL"])
    second = LoggedFloor("second", log, subprocess_env["DATABASE_URL"])
    try:
        rates = single_enqueue_in_turns({"first": first, "second": second}, SIZES)
        enqueued = first.connection.execute("SELECT count(*) FROM bench_floor_jobs").fetchone()
    finally:
        with first.connection.transaction():
            first.connection.execute("DROP TABLE bench_floor_jobs")
        first.connection.close()
        second.connection.close()

    per_round = SIZES.enqueue // SINGLE_ENQUEUE_ROUNDS
    assert log == (["first"] * per_round + ["second"] * per_round) * SINGLE_ENQUEUE_ROUNDS
    assert enqueued == (len(log),)
    assert set(rates) == {"first", "second"} and all(rate > 0 for rate in rates.values())
