"""`runworker`'s options: a wrong value is refused by name before the worker starts."""

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--concurrency", "0"], "argument --concurrency: invalid positive_int value: '0'"),
        (["--concurrency", "four"], "argument --concurrency: invalid positive_int value"),
        (["--prefetch", "-1"], "argument --prefetch: invalid non_negative_int value: '-1'"),
        (["--max-jobs", "0"], "argument --max-jobs: invalid positive_int value: '0'"),
        (["--queues", ",,"], "argument --queues: name at least one queue"),
        (["--queue", "emails"], "argument --queue: 'emails': write NAME=N, N handler slots"),
        (["--queue", "emails=0"], "argument --queue: 'emails=0': write NAME=N"),
        (["--scheduler", "fifo"], "argument --scheduler: invalid choice: 'fifo'"),
    ],
)
def test_a_wrong_option_is_refused_with_its_name(arguments: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("runworker", *arguments)
