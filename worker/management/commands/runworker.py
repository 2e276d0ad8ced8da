"""`python manage.py runworker`: run jobs until stopped (see worker/worker.py)."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from jobs.command_options import (
    MOST_HANDLER_SLOTS,
    handler_slots,
    non_negative_int,
    positive_int,
)
from jobs.events import background_publisher
from jobs.queue_names import QueueSelection, name_errors
from jobs.tasks_backend import finished_signals
from worker.schedulers import SCHEDULERS
from worker.worker import LANE_STOP, LANE_STOP_NOW, Worker

logger = logging.getLogger(__name__)


def queue_list(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    for name in names:
        if wrong := name_errors(name):
            raise argparse.ArgumentTypeError(f"{name!r}: {wrong[0]}")
    if not names:
        raise argparse.ArgumentTypeError("name at least one queue")
    return names


def queue_slots(value: str) -> tuple[str, int]:
    """NAME=N: one queue, N handler slots of its own. Never a list: the lane's slots would be
    the queues' between them, and one queue's burst could take all of them."""
    name, _, slots = value.partition("=")
    if not name.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: write NAME=N, N handler slots")
    if "," in name:
        raise argparse.ArgumentTypeError(
            f"{value!r}: one queue per --queue, each with slots of its own "
            "(repeat --queue for each queue)"
        )
    (name,) = queue_list(name)
    try:
        positive_int(slots)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{value!r}: write NAME=N, N handler slots") from None
    return name, handler_slots(slots)


class Command(BaseCommand):
    # A worker serves no requests: the checks of URLs, templates, static files and the admin
    # are the web process's, and the URLs' alone imported the URLconf (the API, the console,
    # DRF): 0.4 s of CPU at every start of a worker and of each of its lanes.
    requires_system_checks = [
        checks.Tags.models,
        checks.Tags.caches,
        checks.Tags.compatibility,
        checks.Tags.signals,
        checks.Tags.async_support,
        checks.Tags.translation,
    ]
    help = (
        "Run a worker: claim due jobs and run their handlers until SIGTERM, SIGINT or SIGHUP. "
        "The first signal lets running jobs finish (SCHEDULER_SHUTDOWN_GRACE), a second "
        "stops at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scheduler",
            choices=sorted(SCHEDULERS),
            default="heap",
            help="In-memory scheduler ordering the due jobs (default: heap).",
        )
        parser.add_argument(
            "--concurrency",
            type=handler_slots,
            default=None,
            metavar="N",
            help=f"Handlers run at once, at most {MOST_HANDLER_SLOTS} "
            "(default: SCHEDULER_CONCURRENCY).",
        )
        parser.add_argument(
            "--prefetch",
            type=non_negative_int,
            default=None,
            metavar="N",
            help="Claimed jobs held beyond the busy threads, waiting for a free one; 0: claim "
            "only for free threads (default: SCHEDULER_PREFETCH).",
        )
        parser.add_argument(
            "--queues",
            type=queue_list,
            default=None,
            metavar="NAME,...",
            help="Serve only these queues, comma-separated (default: every queue).",
        )
        parser.add_argument(
            "--queue",
            type=queue_slots,
            action="append",
            default=[],
            metavar="NAME=N",
            help="Give a queue N handler slots of its own (a worker process of its own, "
            "started and stopped with this one); the other slots never run its jobs. "
            "One queue each; repeatable.",
        )
        parser.add_argument("--once", action="store_true", help="Run what is due now, then exit.")
        parser.add_argument(
            "--max-jobs",
            type=positive_int,
            default=None,
            metavar="N",
            help="Exit after running N jobs (each --queue lane counts its own; the first to "
            "reach N stops them all).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dedicated = dict(options["queue"])
        # Mistakes of the command line, as argparse's: exit code 2, not a worker's failure.
        given = Counter(name for name, _slots in options["queue"])
        if repeated := sorted(name for name, times in given.items() if times > 1):
            raise CommandError(
                "a queue is given its own slots with --queue more than once: "
                + ", ".join(repeated),
                returncode=2,
            )
        if both := sorted(set(options["queues"] or ()) & set(dedicated)):
            raise CommandError(
                "a queue given its own slots with --queue is not also in --queues: "
                + ", ".join(both),
                returncode=2,
            )
        # A worker holds a fixed set of connections for its whole life: its loop's, its
        # completer's and its listener's, plus one per handler thread that queries, kept for
        # its next job (a new PostgreSQL connection per job would cost more than most jobs).
        # A pool (settings: for web processes) would only keep more of them open, idle.
        connection.close()
        connection.settings_dict["OPTIONS"].pop("pool", None)
        connection.settings_dict["CONN_MAX_AGE"] = None
        children = [self._start_lane(name, slots, options) for name, slots in dedicated.items()]
        worker = Worker(
            scheduler=options["scheduler"],
            concurrency=options["concurrency"],
            prefetch=options["prefetch"],
            once=options["once"],
            max_jobs=options["max_jobs"],
            queues=QueueSelection(options["queues"], tuple(dedicated)),
        )
        worker.signal_listeners.append(
            lambda signals: _pass_on(LANE_STOP if signals == 1 else LANE_STOP_NOW, children)
        )
        ended = threading.Event()
        if not options["once"]:
            for name, child in zip(dedicated, children, strict=True):
                _watch_lane(name, child, worker, ended, options["max_jobs"])
        # What is loaded by now (Django, the apps and their handlers, the worker) lives as
        # long as the process: out of the collector's sight, a full collection walks only
        # what jobs made since. It walked ~90,000 objects, a 45 ms stop of every thread about
        # every 5,000 jobs of a drain, and a drain spent about 10 us of CPU a job more (as
        # `gc.freeze()` does for the web processes, `scheduler_project.server`).
        gc.freeze()
        code = 1  # until the worker returns one: what it raises is a failure
        try:
            code = worker.run()
        finally:
            ended.set()
            # Ended by its --max-jobs, or by a failure, the worker takes its lanes with it:
            # left running, they held the process up while its own queues went unserved.
            # Under --once each lane runs what is due to its end.
            if code or not options["once"]:
                _pass_on(LANE_STOP, children)
            codes = [child.wait() for child in children]
        # A lane killed by a signal has a negative code; one stopped before it had set its
        # handlers (it had not registered) dies of the stop its worker passed on, and is clean.
        code = code or (1 if any(c not in (0, -LANE_STOP, -LANE_STOP_NOW) for c in codes) else 0)
        if code:
            sys.exit(code)

    def run_from_argv(self, argv: list[str]) -> None:
        """The command line's `runworker` is the process's life, and ends it; called in a
        process of its own (`call_command`, a test), the worker returns as any command."""
        try:
            super().run_from_argv(argv)
        except SystemExit as ended:
            _leave_threads_handlers_started(ended.code if isinstance(ended.code, int) else 1)
            raise
        _leave_threads_handlers_started(0)

    @staticmethod
    def _start_lane(name: str, slots: int, options: dict[str, Any]) -> subprocess.Popen[bytes]:
        """A worker process serving only `name`, with `slots` handler slots."""
        command = [
            sys.executable,
            str(Path(settings.BASE_DIR) / "manage.py"),
            "runworker",
            "--scheduler",
            options["scheduler"],
            "--concurrency",
            str(slots),
            "--queues",
            name,
        ]
        if options["prefetch"] is not None:
            command += ["--prefetch", str(options["prefetch"])]
        if options["once"]:
            command.append("--once")
        if options["max_jobs"] is not None:
            command += ["--max-jobs", str(options["max_jobs"])]
        # Its own session: a Ctrl-C in the terminal reaches this process only, which passes
        # its stop on as LANE_STOP or LANE_STOP_NOW.
        return subprocess.Popen(  # noqa: S603 - our own command
            command, start_new_session=True, preexec_fn=_stop_with_parent
        )


def _watch_lane(
    name: str,
    child: subprocess.Popen[bytes],
    worker: Worker,
    ended: threading.Event,
    max_jobs: int | None,
) -> None:
    """A lane that ends while its worker runs on (killed, crashed, or done with its
    --max-jobs) stops the worker too, gracefully, and the worker exits non-zero unless the
    lane ended cleanly: the supervisor watches the worker only, and restarts the two
    together. Left alone, the lane's queue went unserved without a word."""

    def watch() -> None:
        code = child.wait()
        if worker.signals or ended.is_set():
            return  # told to stop, as the worker was, or stopped by it
        level = logging.INFO if code == 0 and max_jobs is not None else logging.CRITICAL
        logger.log(level, "the lane for queue %s ended (exit code %s): stopping", name, code)
        worker.request_stop()

    threading.Thread(target=watch, name=f"lane-{name}", daemon=True).start()


def _leave_threads_handlers_started(code: int) -> None:
    """Exit with `code` now if threads that job code started (not daemons) still run: Python
    would wait for them after the worker has stopped, until a supervisor's kill."""
    left = [
        thread.name
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
    ]
    if not left:
        return
    logger.warning(
        "threads started by handlers still run (%s): the worker exits without them",
        ", ".join(left),
    )
    # What the exit handlers would have done: the last events and task_finished signals out,
    # the log flushed.
    background_publisher.flush()
    finished_signals.flush_at_exit()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _pass_on(signum: int, children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signum)


def _stop_with_parent() -> None:
    """In a lane's process: a SIGTERM when this worker dies without passing one on (SIGKILL),
    so that no lane outlives it. Linux only."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
