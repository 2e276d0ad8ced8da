"""`python manage.py runworker`: run jobs until stopped (see worker/worker.py)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from worker.schedulers import SCHEDULERS
from worker.worker import Worker


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = "Run a worker: claim due jobs and run their handlers until SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scheduler",
            choices=sorted(SCHEDULERS),
            default="heap",
            help="In-memory scheduler ordering the due jobs (default: heap).",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=None,
            help="Handlers run at once (default: SCHEDULER_CONCURRENCY).",
        )
        parser.add_argument(
            "--prefetch",
            type=int,
            default=None,
            help="Claimed jobs held beyond the busy threads, waiting for a free one "
            "(default: SCHEDULER_PREFETCH).",
        )
        parser.add_argument("--once", action="store_true", help="Run what is due now, then exit.")
        parser.add_argument(
            "--max-jobs", type=positive_int, default=None, help="Exit after running N jobs."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # A worker holds a fixed set of connections for its whole life: its loop's and its
        # listener's, plus one per running handler that queries, closed when it returns.
        # A pool (settings: for web processes) would only keep more of them open, idle.
        connection.close()
        connection.settings_dict["OPTIONS"].pop("pool", None)
        worker = Worker(
            scheduler=options["scheduler"],
            concurrency=options["concurrency"],
            prefetch=options["prefetch"],
            once=options["once"],
            max_jobs=options["max_jobs"],
        )
        code = worker.run()
        if code:
            sys.exit(code)
