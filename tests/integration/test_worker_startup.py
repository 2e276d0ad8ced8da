"""A worker started over a backlog loads it once: its first feed waits for its listener."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobs import state
from jobs.models import Job
from worker.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


# How long the listener takes to connect here: a database farther away than this machine's.
LISTENER_CONNECT_SECONDS = 0.2


class FeedRecordingWorker(Worker):
    """A worker that notes when each of its feeds begins, whose listener connects slowly."""

    feeds: list[float]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        listen = self.listener._run

        def slowly() -> None:
            time.sleep(LISTENER_CONNECT_SECONDS)
            listen()

        self.listener._thread = threading.Thread(target=slowly, name="listener", daemon=True)

    def _build_units(self) -> None:
        super()._build_units()
        self.feeds = []
        feed = self.feeder.run_once

        def recorded() -> dict[str, int]:
            self.feeds.append(time.monotonic())
            return feed()

        self.feeder.run_once = recorded  # type: ignore[method-assign]


def test_a_backlog_present_at_start_is_loaded_once_and_run():
    backlog = 3000
    state.enqueue_many(state.JobSpec("noop", {}) for _ in range(backlog))
    worker = FeedRecordingWorker(max_jobs=backlog)

    assert worker.run() == 0

    assert Job.objects.filter(status="completed").count() == backlog
    # Begun before the listener's LISTEN took effect, the first feed was repeated as soon as
    # the listener asked for one: the whole backlog was read twice before the first claim.
    assert len(worker.feeds) == 1


def test_a_worker_starts_without_loading_the_web_s_urls(subprocess_env):
    # Django's system checks for URLs import the URLconf, and with it the API, the console and
    # DRF: 0.4 s of CPU at every worker's (and every lane's) start for routes it never serves.
    finished = subprocess.run(
        [sys.executable, "-X", "importtime", "manage.py", "runworker", "--once"],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in finished.stderr.splitlines()}
    assert "worker.worker" in imported
    assert not imported & {"scheduler_project.urls", "jobs.api.views", "rest_framework.views"}
