"""The management commands' options: a wrong value is refused by name before the command
runs (`runworker` before the worker starts)."""

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["runworker", "--concurrency", "0"],
            "argument --concurrency: expected a positive integer, got '0'",
        ),
        (
            ["runworker", "--concurrency", "four"],
            "argument --concurrency: expected a positive integer",
        ),
        (
            ["runworker", "--prefetch", "-1"],
            "argument --prefetch: expected an integer of 0 or more, got '-1'",
        ),
        (
            ["runworker", "--max-jobs", "0"],
            "argument --max-jobs: expected a positive integer, got '0'",
        ),
        (["runworker", "--queues", ",,"], "argument --queues: name at least one queue"),
        (
            ["runworker", "--queue", "emails"],
            "argument --queue: 'emails': write NAME=N, N handler slots",
        ),
        (["runworker", "--queue", "emails=0"], "argument --queue: 'emails=0': write NAME=N"),
        # Every thread the host had, then "can't start new thread".
        (
            ["runworker", "--concurrency", "99999999999", "--once"],
            "argument --concurrency: expected at most 1000 handler slots a process, got "
            "'99999999999': run more worker processes instead",
        ),
        (
            ["runworker", "--queue", "a=99999999999", "--once"],
            "argument --queue: expected at most 1000 handler slots a process, got '99999999999'",
        ),
        # One queue a lane: the main worker excluded a queue named "qa,qb" and ran the jobs
        # of both. (--once: were it accepted, the worker would not run on.)
        (
            ["runworker", "--queue", "qa,qb=2", "--once"],
            "argument --queue: 'qa,qb=2': one queue per --queue, each with slots of its own",
        ),
        (
            ["runworker", "--queue", "emails=1", "--queue", "emails=2"],
            "a queue is given its own slots with --queue more than once",
        ),
        (["runworker", "--scheduler", "fifo"], "argument --scheduler: invalid choice: 'fifo'"),
        (
            ["seed_history", "--rows", "-3"],
            "argument --rows: expected a positive integer, got '-3'",
        ),
        (["seed_history", "--rows", "9", "--days", "0"], "argument --days: expected a positive"),
        (["benchmark", "--runs", "x"], "argument --runs: expected a positive integer, got 'x'"),
    ],
)
def test_a_wrong_option_is_refused_with_its_name(arguments: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command(*arguments)
