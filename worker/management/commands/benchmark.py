"""`manage.py benchmark`: the schedulers side by side (`make benchmark` then runs the
end-to-end table of `python -m benchmarks`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from jobs.command_options import positive_int
from worker.bench.schedulers import DEFAULT_RUNS, DEFAULT_SIZES, render, run


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(part) for part in value.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive job counts separated by commas, like 1000,5000; got {value!r}"
        )
    return sizes


class Command(BaseCommand):
    help = (
        "MinHeap vs SkipList (and bare heapq) insert and full drain, median of N runs, written "
        "to benchmarks/scheduler.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--sizes",
            type=_sizes,
            default=list(DEFAULT_SIZES),
            help="job counts, comma-separated (default 1000,5000,10000)",
        )
        parser.add_argument(
            "--runs", type=positive_int, default=DEFAULT_RUNS, help="runs per figure (median)"
        )
        parser.add_argument(
            "--output",
            type=Path,
            default=settings.BASE_DIR / "benchmarks" / "scheduler.md",
            help="where the Markdown table is written (default benchmarks/scheduler.md)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        report = render(run(options["sizes"], options["runs"]), options["runs"])
        self.stdout.write(report)
        output: Path = options["output"]
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report, encoding="utf-8")
        self.stdout.write(f"Written to {output}")
