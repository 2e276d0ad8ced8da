"""`manage.py runworker` as an operator deploying it meets it: its help against README's
flag table, a wrong command line refused in one line with argparse's exit code 2, a
setting that cannot work refused at start naming its variable, and README's configuration
table documenting only what the code reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.core.management.base import BaseCommand

from tests.unit.test_settings import ROOT, readme_configuration_rows, variables_read_by_the_code
from worker.management.commands.runworker import Command

# PostgreSQL's bigint, the type of a statement's LIMIT.
LARGEST_BIGINT = 2**63 - 1


def runworker(*args: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """`manage.py runworker` as a process. `timeout`: a command line or a setting it should
    refuse is refused before the worker starts, long before that."""
    return subprocess.run(
        [sys.executable, "manage.py", "runworker", *args],
        cwd=ROOT,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=30,
    )


def errors_of(done: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr without argparse's usage lines and the log lines of the apps' start."""
    return [
        line
        for line in done.stderr.splitlines()
        if not line.startswith(("usage:", " ", "{"))
        if line.strip()
    ]


def readme_worker_flags() -> dict[str, str]:
    """README's table of `runworker` flags: `--flag SYNTAX` by flag."""
    text = (ROOT / "README.md").read_text()
    table = text.split("| flag | meaning |", 1)[1].split("\n\n", 1)[0]
    flags = {}
    for match in re.finditer(r"^\| `(--[a-z-]+)([^`]*)` \|", table, re.MULTILINE):
        flags[match[1]] = (match[1] + match[2]).replace("\\|", "|")
    return flags


def usage_of(command: BaseCommand) -> str:
    return " ".join(command.create_parser("manage.py", "runworker").format_usage().split())


def own_options() -> dict[str, str]:
    """runworker's own options (not Django's common ones), each as its usage writes it."""
    common = set(re.findall(r"--[a-z-]+", usage_of(BaseCommand())))
    usage = usage_of(Command())
    return {
        match[1]: match[0]
        for match in re.finditer(r"(--[a-z-]+)[^\]]*", usage)
        if match[1] not in common
    }


def test_readme_lists_every_flag_of_runworker_and_no_other():
    assert set(readme_worker_flags()) == set(own_options())


def test_help_writes_each_flag_as_readme_does():
    # Before: `--concurrency CONCURRENCY`, `--max-jobs MAX_JOBS` ("Exit after running N
    # jobs": which N?), where README has `--concurrency N` and `--max-jobs N`.
    readme = {
        flag: syntax.replace("heap|skiplist", "{heap,skiplist}")
        for flag, syntax in readme_worker_flags().items()
    }
    assert own_options() == readme


def test_help_names_the_bounds_and_the_stop():
    help_text = " ".join(Command().create_parser("manage.py", "runworker").format_help().split())
    assert "at most 1000" in help_text
    # What README says of the signals: the first lets running jobs finish, a second does not.
    assert "a second stops at once" in help_text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # Before: "name at least one queue", for a flag that takes one.
        (["--queue", "=2"], "argument --queue: '=2': write NAME=N, N handler slots"),
        (["--queue", "a=0"], "argument --queue: 'a=0': write NAME=N, N handler slots"),
        (["--queue", "a=two"], "argument --queue: 'a=two': write NAME=N, N handler slots"),
        # Before: these two were a CommandError, exit code 1 as for a worker that failed.
        (
            ["--queue", "emails=1", "--queue", "emails=2"],
            "a queue is given its own slots with --queue more than once: emails",
        ),
        (
            ["--queues", "reports,emails", "--queue", "emails=1"],
            "a queue given its own slots with --queue is not also in --queues: emails",
        ),
        (
            ["--prefetch", "many"],
            "argument --prefetch: expected an integer of 0 or more, got 'many'",
        ),
        (["--concurrency", "-3"], "argument --concurrency: expected a positive integer, got '-3'"),
    ],
)
def test_a_wrong_command_line_is_one_line_and_exit_code_2(arguments, message):
    done = runworker(*arguments, "--once")
    assert done.returncode == 2, done.stderr
    errors = errors_of(done)
    assert len(errors) == 1, done.stderr
    assert errors[0].endswith(message), done.stderr


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        # Before: accepted; then every job created without its own max_retries broke the
        # jobs' check constraint (1 to 10): an IntegrityError, a 500 from POST /jobs.
        (
            {"SCHEDULER_DEFAULT_MAX_RETRIES": "11"},
            "SCHEDULER_DEFAULT_MAX_RETRIES='11': must be at most 10.",
        ),
        # Before: accepted; then the worker logged "database unavailable (DataError: bigint
        # out of range); retrying in 5.0 s" at each feed or claim, and ran nothing.
        *(
            (
                {name: str(LARGEST_BIGINT + 1)},
                f"{name}='{LARGEST_BIGINT + 1}': must be at most {LARGEST_BIGINT}.",
            )
            for name in (
                "SCHEDULER_CLAIM_BATCH",
                "SCHEDULER_FEEDER_LIMIT",
                "SCHEDULER_PRUNE_BATCH",
            )
        ),
        # Before: a traceback of 30 lines ending in "No module named 'yourap'".
        (
            {"SCHEDULER_EXTRA_APPS": "tests.handlers_app, yourap.apps.YourAppConfig"},
            "SCHEDULER_EXTRA_APPS: no module 'yourap' on the Python path.",
        ),
        # Before: "settings.DATABASES is improperly configured. Please supply the NAME or
        # OPTIONS['service'] value.", naming no variable.
        (
            {"DATABASE_URL": "postgres://db.example:5432"},
            "DATABASE_URL='postgres://db.example:5432': names no database "
            "(postgres://user@host:5432/<database>).",
        ),
    ],
)
def test_a_setting_that_cannot_work_stops_the_worker_at_start_naming_it(environment, message):
    done = runworker("--once", **environment)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == f"ImproperlyConfigured: {message}", done.stderr


def test_the_worker_starts_with_an_app_named_by_its_config_class():
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "SCHEDULER_EXTRA_APPS": "tests.handlers_app.apps.HandlersAppConfig"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


def test_readme_configuration_table_documents_only_what_the_code_reads():
    # The other way round (read, so documented) is test_settings'; a variable the code no
    # longer read stayed in README's table.
    stale = set(readme_configuration_rows()) - variables_read_by_the_code()
    assert not stale, f"nothing reads these any more: {sorted(stale)}"
