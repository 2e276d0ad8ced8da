"""A thread the worker's loop depends on (claimer, completer, listener) that fails stops the
worker by force, for its supervisor to restart it: it does not go on claiming jobs whose
outcomes nobody would record."""

from __future__ import annotations

import logging
import time
from queue import SimpleQueue
from typing import Any

import pytest

from worker.maintenance import BackgroundUnit, Unit
from worker.threads import loop_thread
from worker.worker import Worker


def test_a_thread_that_fails_tells_the_loop_and_the_log(caplog: pytest.LogCaptureFixture):
    inbox: SimpleQueue[Any] = SimpleQueue()

    def report() -> None:
        raise AttributeError("a bug in reporting")

    thread = loop_thread(report, "completer", inbox)
    with caplog.at_level(logging.CRITICAL, logger="worker.threads"):
        thread.start()
        thread.join(10)
    assert inbox.get(timeout=10) == ("crashed", "completer")
    (record,) = [r for r in caplog.records if r.name == "worker.threads"]
    assert "completer thread failed" in record.getMessage()
    assert record.exc_info is not None and "a bug in reporting" in str(record.exc_info[1])


def test_a_thread_that_ends_by_itself_tells_nobody():
    inbox: SimpleQueue[Any] = SimpleQueue()
    thread = loop_thread(lambda: None, "listener", inbox)
    thread.start()
    thread.join(10)
    assert inbox.empty()


def test_the_loop_stops_by_force_once_a_thread_failed(worker: Worker):
    worker.inbox.put(("crashed", "completer"))
    assert worker._loop() is True
    assert worker.crashed == "completer"


def test_a_background_unit_that_fails_logs_it_and_runs_again(caplog: pytest.LogCaptureFixture):
    # The pruner on its thread: a failure other than the database's ended the thread
    # without a word, and retention stopped until the worker restarted.
    class Failing(Unit):
        name = "pruner"
        interval = 0.01

        def __init__(self) -> None:
            self.runs = 0

        def run_once(self) -> dict[str, int]:
            self.runs += 1
            if self.runs == 1:
                raise KeyError("a bug in a pass")
            return {}

    unit = Failing()
    background = BackgroundUnit(unit, retry_after=0.01)
    with caplog.at_level(logging.ERROR, logger="worker.maintenance"):
        background.start()
        deadline = time.monotonic() + 10
        while unit.runs < 2:
            assert time.monotonic() < deadline, "the unit did not run again"
            time.sleep(0.01)
        background.stop(timeout=10)
    (record,) = [r for r in caplog.records if r.name == "worker.maintenance"]
    assert "pruner" in record.getMessage() and record.exc_info is not None
