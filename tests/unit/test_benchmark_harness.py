"""`python -m benchmarks`: its options and its tables (no timing is asserted here)."""

from __future__ import annotations

import pytest

from benchmarks import table
from benchmarks.__main__ import parse_args, sizes_of, with_database, with_redis_db
from benchmarks.workload import Sizes, percentile

FLOOR_ROW = {
    "single_enqueue": 2000.0,
    "batch_enqueue": 50000.0,
    "drain": 16000.0,
    "latency": {"p50_ms": 2.5, "p99_ms": 8.0},
}
DEFAULTS_ROW = {
    "single_enqueue": 250.0,
    "batch_enqueue": 20000.0,
    "http": {"requests": 570, "per_s": 57.0, "errors": 3, "p50_ms": 324.0, "p99_ms": 731.0},
    "drain": 240.0,
    "latency": {"p50_ms": 9.0, "p99_ms": 24.0},
}


def cells(lines: list[str], measure: str) -> list[str]:
    (line,) = [line for line in lines if line.startswith(f"| {measure}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_side_by_side_puts_each_project_column_next_to_its_ratio_to_the_floor() -> None:
    lines = table.side_by_side(
        {
            table.FLOOR: FLOOR_ROW,
            table.DEFAULTS: DEFAULTS_ROW,
            "project, tuned (--concurrency 250)": {"drain": 2000.0, "latency": {"p50_ms": 10.0}},
            "Huey (Redis)": {"single_enqueue": 9500.0, "drain": 3000.0},
        }
    )
    assert cells(lines, "measure") == [
        "measure", "bare SQL floor", "project, defaults", "defaults / floor",
        "project, tuned (--concurrency 250)", "tuned / floor", "Huey (Redis)",
    ]  # fmt: skip
    assert cells(lines, "single enqueue") == [
        "single enqueue (one job per transaction) (jobs/s)", "2,000", "250", "0.12x", "-", "-",
        "9,500",
    ]  # fmt: skip
    assert cells(lines, "drain")[1:] == ["16,000", "240", "0.01x", "2,000", "0.12x", "3,000"]
    assert cells(lines, "enqueue-to-start p50")[1:] == [
        "2.50", "9.00", "3.60x", "10.0", "4.00x", "-",
    ]  # fmt: skip
    # Only the project has an HTTP figure: no ratio without a floor figure.
    assert cells(lines, "HTTP enqueue answers")[1:] == ["-", "570", "-", "-", "-", "-"]
    assert cells(lines, "HTTP enqueue errors")[1:] == ["-", "3", "-", "-", "-", "-"]
    assert cells(lines, "HTTP enqueue p99")[1:3] == ["-", "731"]
    assert lines[-1] == table.RATIO_NOTE


def test_side_by_side_leaves_out_measures_no_system_has() -> None:
    lines = table.side_by_side({"Huey (Redis)": {"drain": 3000.0}})
    assert [line.split("|")[1].strip() for line in lines[2:]] == [
        "drain, one worker process (jobs/s)"
    ]
    assert table.RATIO_NOTE not in lines


def test_history_table_sets_each_figure_beside_its_empty_table_figure() -> None:
    empty = {**DEFAULTS_ROW, "api_list": {"p95_ms": 20.0}}
    full = {
        "single_enqueue": 10.0,
        "drain": 200.0,
        "latency": {"p50_ms": 19.0, "p99_ms": 308.0},
        "api_list": {"p95_ms": 85.0},
    }
    lines = table.history(empty, full, 1_000_000)
    assert cells(lines, "measure") == [
        "measure", "empty table", "1,000,000 jobs of history", "history / empty", "bound",
    ]  # fmt: skip
    assert cells(lines, "single enqueue")[1:] == [
        "250", "10.0", "0.04x", "within 1.5x of empty: MISSES",
    ]  # fmt: skip
    assert cells(lines, "drain")[-1] == "within 1.5x of empty: holds"  # 240 -> 200 jobs/s
    assert cells(lines, "enqueue-to-start p99")[1:] == [
        "24.0", "308", "12.83x", "within 1.5x of empty: MISSES",
    ]  # fmt: skip
    assert cells(lines, "GET /api/v1/jobs?limit=20 p95")[1:] == [
        "20.0", "85.0", "4.25x", "under 100 ms: holds",
    ]  # fmt: skip
    assert cells(lines, "console Dashboard p95")[1:] == ["-", "-", "-", "under 150 ms"]
    assert cells(lines, "admin job list p95")[-1] == "under 500 ms"
    assert cells(lines, "job counters read")[-1] == "-"


def test_percentile_takes_the_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 0.5) == 51.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([4.0], 0.99) == 4.0


def test_options_default_to_the_workload_sizes_and_take_overrides() -> None:
    assert sizes_of(parse_args([])) == Sizes()
    args = parse_args(["--rows", "1000000", "--peers", "huey,celery", "--drain", "500"])
    assert (args.rows, args.peers, sizes_of(args).drain) == (1_000_000, ["huey", "celery"], 500)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--peers", "huey,rq"], "expected peers among procrastinate, huey, celery"),
        (["--drain", "0"], "--drain must be more than 0"),
        (["--http-seconds", "-1"], "--http-seconds must be more than 0"),
        (["--probes", "ten"], "invalid int value"),
        (["--rows", "-5"], "--rows must be 0 or more"),
        (["--database", "scheduler"], "must not be the database of DATABASE_URL"),
    ],
)
def test_bad_options_are_refused_with_a_message(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/scheduler")
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_the_runs_databases_are_named_on_the_same_servers() -> None:
    url = "postgres://postgres:pw@127.0.0.1:5432/scheduler"
    assert (
        with_database(url, "scheduler_bench")
        == "postgres://postgres:pw@127.0.0.1:5432/scheduler_bench"
    )
    assert with_redis_db("redis://127.0.0.1:6379/0", 13) == "redis://127.0.0.1:6379/13"
    assert with_redis_db("unix:///tmp/redis.sock?db=0", 13) == "unix:///tmp/redis.sock?db=13"


def test_pruning_table_says_how_slow_the_slowest_round_was_and_whether_one_stalled() -> None:
    steady = {"drain": 1000.0, "slowest": 900.0, "rounds": 3, "stalled": False, "seconds": 30.0}
    pruning = {**steady, "drain": 800.0, "slowest": 450.0, "rounds": 9, "stalled": True}
    lines = table.pruning(
        {"steady": steady, "pruning": {**pruning, "pruned": 100_000, "pruned_per_s": 1000.0}}
    )
    assert cells(lines, "drain, median of rounds")[1:] == ["1,000", "800", "0.80x"]
    assert cells(lines, "drain, slowest round")[1:] == ["900", "450", "0.50x"]
    assert cells(lines, "a round stalled")[1:3] == ["no", "yes"]
    assert cells(lines, "history rows pruned")[1:3] == ["0", "100,000"]


def test_the_passes_of_a_measure_are_summed_up_by_the_middle_of_each_figure() -> None:
    passes = [
        {"drain": 100.0, "latency": {"p50_ms": 4.0, "p99_ms": 9.0}},
        {"drain": 300.0, "latency": {"p50_ms": 6.0, "p99_ms": 11.0}},
        {"drain": 200.0, "latency": {"p50_ms": 5.0}},
    ]
    # p99 is missing from one pass: left out rather than made up from two.
    assert table.middle(passes) == {"drain": 200.0, "latency": {"p50_ms": 5.0}}
    assert table.middle([]) == {}
