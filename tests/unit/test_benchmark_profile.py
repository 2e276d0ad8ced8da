"""`make benchmark-profile`: which part of a job's life each sampled worker stack is counted
under (stacks as py-spy records them from `runworker`), and what an explained statement is
split into (no timing is asserted here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.profile import plan_parts, read_raw

BOOT = "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982)"
LOOP = (
    "<module> (manage.py:14);Command.handle (worker/management/commands/runworker.py:113);"
    "Worker._loop (worker/worker.py:292);Worker._turn (worker/worker.py:318)"
)
DELIVER = (
    "Notifier.emit_after_commit (jobs/notifier.py:61);Notifier.deliver (jobs/notifier.py:67);"
    "publish_batch (jobs/events.py:228);BackgroundPublisher.submit (jobs/events.py:175)"
)
SAMPLES = [
    # An idle worker claims on the loop's own connection.
    f"thread (1): MainThread;{LOOP};Worker._claim (worker/worker.py:471);"
    "claim (jobs/state.py:479);Connection.wait (psycopg/connection.py:495) 5",
    # The claim's job.started, delivered after its commit, is the events' work.
    f"thread (1): MainThread;{LOOP};claim (jobs/state.py:485);{DELIVER} 2",
    f"thread (1): MainThread;{LOOP};Worker._start (worker/worker.py:515);"
    "Processor.start (worker/processor.py:218) 7",
    f"thread (2): claimer;{BOOT};Claimer._run (worker/claimer.py:60);"
    "claim (jobs/state.py:479);_fetch_prepared (jobs/sql/__init__.py:83) 3",
    f"thread (3): completer;{BOOT};Completer._run (worker/completer.py:97);"
    "Connection.commit (psycopg/connection.py:309) 4",
    f"thread (3): completer;{BOOT};Completer._run (worker/completer.py:97);"
    "Atomic.__exit__ (django/db/transaction.py:263);"
    f"{DELIVER} 1",
    f"thread (4): handler-2;{BOOT};Processor._serve (worker/processor.py:310);"
    "bench_noop (benchmarks/handlers.py:14) 6",
    f"thread (5): event-publisher;{BOOT};BackgroundPublisher._run (jobs/events.py:212);"
    "PubSubCommands.publish (redis/commands/core.py:11045) 8",
    f"thread (6): stats;{BOOT};StatsPublisher._run (jobs/stats.py:150) 1",
    f"thread (7): listener;{BOOT};Listener._run (worker/wakeup.py:74);"
    "Connection.notifies (psycopg/connection.py:400) 1",
    f"thread (8): unit-pruner;{BOOT};BackgroundUnit._run (worker/maintenance.py:240) 2",
]


def test_each_sample_counts_under_the_part_its_thread_and_frames_serve(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(SAMPLES) + "\n")

    assert read_raw(raw) == {
        ("claim", "psycopg"): 5,
        ("claim", "Python"): 3,
        ("events", "Python"): 2 + 1 + 1,
        ("loop", "Python"): 7,
        ("complete", "psycopg"): 4,
        ("run", "Python"): 6,
        ("events", "redis-py"): 8,
        ("wake-up", "psycopg"): 1,
        ("other", "Python"): 2,
    }


# The shape of `EXPLAIN (ANALYZE, FORMAT JSON)`'s one result, in milliseconds: a claim whose
# CTEs update `jobs` and insert into `job_attempts`, its triggers after it.
EXPLAINED_CLAIM = {
    "Plan": {
        "Node Type": "Sort",
        "Actual Total Time": 0.9,
        "Plans": [
            {
                "Node Type": "ModifyTable",
                "Operation": "Update",
                "Relation Name": "jobs",
                "Actual Total Time": 0.4,
                "Plans": [{"Node Type": "Index Scan", "Actual Total Time": 0.1}],
            },
            {
                "Node Type": "ModifyTable",
                "Operation": "Insert",
                "Relation Name": "job_attempts",
                "Actual Total Time": 0.08,
            },
        ],
    },
    "Triggers": [
        {"Trigger Name": "jobs_count_updates", "Relation": "jobs", "Time": 0.06, "Calls": 1},
        {
            "Trigger Name": "RI_ConstraintTrigger_c_17496",
            "Relation": "job_attempts",
            "Time": 0.04,
            "Calls": 2,
        },
    ],
    "Execution Time": 1.2,
}


def test_an_explained_statement_splits_into_its_writes_of_jobs_and_its_triggers_per_job() -> None:
    assert plan_parts(EXPLAINED_CLAIM, jobs=2) == [
        ("the statement's execution", pytest.approx(600.0)),
        ("its UPDATE of jobs", pytest.approx(200.0)),
        ("trigger jobs_count_updates", pytest.approx(30.0)),
        ("trigger foreign-key check (job_attempts)", pytest.approx(20.0)),
    ]
