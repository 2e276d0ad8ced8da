"""The processor on its own: where handlers run, what comes back, timeouts and cancellation."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from queue import SimpleQueue
from typing import Any

import pytest

from jobs.registry import registry
from jobs.state import ClaimedJob
from tests.handlers_app.handlers import ResizeArgs, typed
from worker import processor as processor_module
from worker.outcome import HandlerTimeout
from worker.processor import Outcome, Processor

ran_on: list[int] = []


def where(job: Any) -> str:
    ran_on.append(threading.get_ident())
    job.logger.info("ran %s", job.payload.get("tag"))
    return "done"


def stubborn(job: Any) -> None:
    time.sleep(job.payload["seconds"])


def polite(job: Any) -> str:
    return "stopped" if job.cancel_event.wait(5) else "finished"


gate = threading.Event()


def gated(job: Any) -> None:
    gate.wait(5)


logged = threading.Event()


def chatty(job: Any) -> None:
    for number in range(job.payload["lines"]):
        job.logger.info("line %d", number)
    logged.set()
    job.cancel_event.wait(5)


@pytest.fixture(autouse=True)
def probe_handlers() -> Iterator[None]:
    registry.register("probe_inline", inline=True)(where)
    registry.register("probe_threaded")(where)
    registry.register("probe_stubborn", timeout=0.2)(stubborn)
    registry.register("probe_polite")(polite)
    registry.register("probe_gated")(gated)
    registry.register("probe_chatty")(chatty)
    ran_on.clear()
    gate.clear()
    logged.clear()
    yield
    gate.set()
    names = (
        "probe_inline",
        "probe_threaded",
        "probe_stubborn",
        "probe_polite",
        "probe_gated",
        "probe_chatty",
    )
    for name in names:
        registry.unregister(name)


def claimed(job_type: str, **payload: Any) -> ClaimedJob:
    job_id = uuid.uuid4()
    return ClaimedJob(job_id, job_type, payload, 2, uuid.uuid4(), 1, 3, job={"id": str(job_id)})


def next_outcome(inbox: SimpleQueue[Any], timeout: float = 5) -> Outcome:
    kind, outcome = inbox.get(timeout=timeout)
    assert kind == "outcome"
    return outcome


def test_inline_handler_runs_on_the_calling_thread_before_start_returns():
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(2, inbox, default_timeout=5)
    attempt = processor.start(claimed("probe_inline", tag="a"))

    assert ran_on == [threading.get_ident()]
    outcome = inbox.get_nowait()[1]
    assert outcome.attempt is attempt and outcome.result == "done" and outcome.error is None
    assert processor.accept(outcome) and not processor.running
    assert [line for _, _, line in attempt.logs.take()] == ["ran a"]
    processor.stop()


def test_other_handlers_run_on_a_handler_thread():
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(2, inbox, default_timeout=5)
    processor.start(claimed("probe_threaded", tag="b"))

    outcome = next_outcome(inbox)
    assert outcome.result == "done"
    assert ran_on and ran_on[0] != threading.get_ident()
    assert processor.accept(outcome)
    processor.stop()


def test_handler_over_its_timeout_is_given_up_and_its_slot_refilled():
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(1, inbox, default_timeout=5)
    processor.start(claimed("probe_stubborn", seconds=1.0))
    time.sleep(0.3)

    (failed,) = processor.expired(time.monotonic())
    assert isinstance(failed.error, HandlerTimeout)
    assert processor.claim_room() == 1 and failed.attempt.context.cancelled
    # The replacement thread serves the next job while the stubborn one still sleeps.
    processor.start(claimed("probe_threaded", tag="c"))
    assert next_outcome(inbox).result == "done"
    late = next_outcome(inbox, timeout=3)
    assert late.attempt is failed.attempt and not processor.accept(late)
    processor.stop()


def test_an_attempt_over_its_timeout_says_how_many_log_lines_it_dropped(monkeypatch):
    monkeypatch.setattr(processor_module, "LOG_LINES_PER_ATTEMPT", 3)
    processor = Processor(1, SimpleQueue(), default_timeout=5)
    processor.start(claimed("probe_chatty", lines=5))
    assert logged.wait(5)

    # Past any deadline: the attempt is given up however slow this machine is.
    (failed,) = processor.expired(time.monotonic() + 3600)
    assert [message for _, _, message in failed.attempt.logs.take()] == [
        "line 0",
        "line 1",
        "line 2",
        "2 more log lines were dropped: an attempt keeps its first 3.",
    ]
    processor.stop()


@pytest.mark.parametrize(("max_bytes", "error"), [(6, None), (5, "result is 6 bytes")])
def test_a_result_is_checked_against_the_setting_as_the_processor_started(
    settings, max_bytes, error
):
    settings.SCHEDULER_MAX_RESULT_BYTES = max_bytes
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(1, inbox, default_timeout=5)
    processor.start(claimed("probe_inline"))  # returns "done": 6 bytes as JSON

    outcome = inbox.get_nowait()[1]
    if error is None:
        assert (outcome.result, outcome.error) == ("done", None)
    else:
        assert outcome.error_record.error_message == (
            f"{error} as JSON, over SCHEDULER_MAX_RESULT_BYTES ({max_bytes})."
        )
    processor.stop()


def test_lost_claim_sets_the_cancel_flag_and_its_outcome_is_ignored():
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(1, inbox, default_timeout=5)
    attempt = processor.start(claimed("probe_polite"))
    until(lambda: attempt.started is not None)

    assert processor.lose(attempt.job.id) is attempt
    outcome = next_outcome(inbox)
    assert outcome.result == "stopped"
    assert not processor.accept(outcome)
    processor.stop()


def test_a_type_without_a_handler_is_not_handled_and_is_listed_once():
    processor = Processor(1, SimpleQueue(), default_timeout=5)
    assert processor.handles("probe_threaded")
    assert not processor.handles("no_such_type")
    assert not processor.handles("no_such_type")
    assert processor.unhandled_types == ["no_such_type"]
    processor.stop()


def test_a_handler_whose_payload_is_declared_as_a_type_gets_an_instance_of_it():
    registry.register("probe_typed", schema=ResizeArgs)(typed)
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(1, inbox, default_timeout=5)
    try:
        processor.start(claimed("probe_typed", url="u", size={"width": 3}))
        outcome = next_outcome(inbox)
    finally:
        registry.unregister("probe_typed")
        processor.stop()
    assert outcome.error is None
    assert outcome.result == {
        "class": "ResizeArgs",
        "fields": {"url": "u", "size": {"width": 3, "height": 100}, "format": "png"},
    }


def until(condition: Any, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_no_claims_while_every_thread_is_busy_and_at_most_prefetch_jobs_wait():
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(2, inbox, default_timeout=5, prefetch=3)
    assert processor.claim_room() == 4  # the free threads, plus half the prefetch

    attempts = [processor.start(claimed("probe_gated")) for _ in range(5)]
    until(lambda: processor.waiting == 3)  # two threads took one each
    assert processor.claim_room() == 0
    assert all(a.deadline is None for a in attempts if a.started is None)

    gate.set()
    for _ in attempts:
        assert processor.accept(next_outcome(inbox))
    assert processor.claim_room() == 4
    processor.stop()


def test_a_claim_goes_ahead_while_the_threads_take_jobs_and_not_while_they_are_held():
    inbox: SimpleQueue[Any] = SimpleQueue()
    # Lately, for this processor, is within a minute: its threads just took their jobs.
    taking = Processor(2, inbox, default_timeout=5, prefetch=4, prefetch_wait=60)
    assert taking.claim_room() == 4  # the free threads, plus half the prefetch
    for _ in range(4):
        taking.start(claimed("probe_gated"))
    until(lambda: taking.waiting == 2)
    # Half the prefetch waits: the other half is claimed ahead, no more.
    assert taking.claim_room() == 2
    taking.start(claimed("probe_gated"))
    assert taking.claim_room() == 0

    # Lately is within a millisecond: its threads, busy for longer, hold their jobs.
    held = Processor(2, inbox, default_timeout=5, prefetch=4, prefetch_wait=0.001)
    for _ in range(2):
        held.start(claimed("probe_gated"))
    until(lambda: held.waiting == 0)
    time.sleep(0.01)
    assert held.claim_room() == 0
    gate.set()
    taking.stop()
    held.stop()


@pytest.mark.parametrize("taken_back", ["lost", "handed back"])
def test_a_job_taken_back_while_it_waits_for_a_thread_never_runs(taken_back):
    """Lost: cancelled or rescued. Handed back: it waited past the bound (`overdue`)."""
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(1, inbox, default_timeout=5, prefetch=1)
    processor.hand_back_after = 0.2
    busy = processor.start(claimed("probe_gated"))
    waiting = processor.start(claimed("probe_threaded", tag="never"))
    until(lambda: busy.started is not None)

    if taken_back == "lost":
        assert processor.lose(waiting.job.id) is waiting
    else:
        assert processor.overdue() == []
        due = processor.next_hand_back()
        assert due is not None and due == waiting.queued + 0.2
        until(lambda: time.monotonic() >= due)
        (handed_back,) = processor.overdue()
        assert handed_back.attempt is waiting and handed_back.handed_back
        assert processor.next_hand_back() is None
    assert set(processor.running) == {busy.job.id}  # the running job stays
    gate.set()
    assert next_outcome(inbox).attempt is busy
    processor.start(claimed("probe_threaded", tag="after"))
    assert next_outcome(inbox).result == "done"
    assert len(ran_on) == 1  # "after" only
    processor.stop()


def test_a_job_that_waited_past_the_bound_is_not_started_by_a_thread_that_comes_first():
    """The process stalled (stopped, swapped out, starved) while a claimed job waited: its
    claim may be gone meanwhile (rescued, run and finished elsewhere). The thread freed
    first leaves it to the loop's hand-back, whose statement is fenced by the attempt."""
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(1, inbox, default_timeout=5, prefetch=1)
    processor.hand_back_after = 0.2
    busy = processor.start(claimed("probe_gated"))
    waiting = processor.start(claimed("probe_threaded", tag="never"))
    until(lambda: busy.started is not None)
    # No loop turn (no `overdue()`) while the bound passes: the stall.
    until(lambda: time.monotonic() >= waiting.queued + 0.2)

    gate.set()
    assert next_outcome(inbox).attempt is busy
    time.sleep(0.3)  # the freed thread's chance to take the waiting job
    assert waiting.started is None and ran_on == []
    (handed_back,) = processor.overdue()
    assert handed_back.attempt is waiting and handed_back.handed_back
    processor.start(claimed("probe_threaded", tag="after"))
    assert next_outcome(inbox).result == "done"
    assert len(ran_on) == 1  # "after" only
    processor.stop()


def test_a_type_is_prefetched_by_its_pace_and_an_unknown_or_slow_one_only_for_an_idle_thread():
    inbox: SimpleQueue[Any] = SimpleQueue()
    processor = Processor(2, inbox, default_timeout=5, prefetch=3, prefetch_wait=0.15)
    first = processor.admission()
    # A job for each idle thread, whatever its type; nothing to wait of a type not run here.
    assert [first.admits(t) for t in ("probe_threaded", "probe_stubborn", "probe_threaded")] == [
        True,
        True,
        False,
    ]

    # The stubborn type runs past its 0.2 s timeout, over a claim's 0.15 thread-seconds of
    # budget (half of 2 threads x 0.15 s).
    processor.start(claimed("probe_stubborn", seconds=0.4))
    until(lambda: processor.expired(time.monotonic() + 1))
    for _ in range(2):
        processor.start(claimed("probe_threaded"))
        assert processor.accept(next_outcome(inbox))
    assert 0 < processor.pace["probe_threaded"] < 0.05
    assert processor.pace["probe_stubborn"] == 0.2

    later = processor.admission()
    assert later.admits("probe_stubborn") and later.admits("probe_stubborn")  # idle threads
    assert not later.admits("probe_stubborn")
    assert [later.admits("probe_threaded") for _ in range(4)] == [True, True, True, False]
    processor.stop()


def admitted(processor: Processor, job_type: str) -> int:
    """How many jobs of `job_type` a claim would take now (of ten candidates)."""
    admission = processor.admission()
    return sum(admission.admits(job_type) for _ in range(10))


def test_a_claims_wait_budget_is_what_the_jobs_already_waiting_leave_of_it():
    """The jobs waiting for a thread, at their pace, take from the budget of the next claim:
    claims ahead one after the other never queue more than `concurrency x prefetch_wait`."""
    inbox: SimpleQueue[Any] = SimpleQueue()
    # Times in 64ths of a second, which floats hold exactly.
    processor = Processor(1, inbox, default_timeout=5, prefetch=20, prefetch_wait=10 / 64)
    processor.pace["probe_threaded"] = 1 / 64
    busy = processor.start(claimed("probe_gated"))
    until(lambda: busy.started is not None)
    # Half of 1 thread x 10/64 s: five jobs of 1/64 s fit a claim with nothing waiting.
    assert admitted(processor, "probe_threaded") == 5
    waiting = [processor.start(claimed("probe_threaded", tag=n)) for n in range(3)]
    assert processor.queued_seconds == 3 / 64

    assert admitted(processor, "probe_threaded") == 2
    processor.lose(waiting[0].job.id)
    assert admitted(processor, "probe_threaded") == 3
    gate.set()
    until(lambda: processor.queued_seconds == 0)
    assert admitted(processor, "probe_threaded") == 5
    processor.stop()


read_on: list[int] = []


class Reported(Exception):
    """Notes the thread its message is read on."""

    def __str__(self) -> str:
        read_on.append(threading.get_ident())
        return "reported"


def raises_reported(job: Any) -> None:
    ran_on.append(threading.get_ident())
    raise Reported()


def test_what_a_handler_raised_is_read_on_the_handlers_thread():
    # Its str() is job code: read by the completer, a slow one held every outcome of the
    # worker behind it (a probe's 4 s __str__ kept twenty quick jobs 8 s in processing).
    registry.register("probe_reported")(raises_reported)
    try:
        inbox: SimpleQueue[Any] = SimpleQueue()
        processor = Processor(1, inbox, default_timeout=5)
        processor.start(claimed("probe_reported"))
        outcome = next_outcome(inbox)
        assert outcome.error_record is not None
        assert outcome.error_record.error_message == "reported"
        assert read_on and set(read_on) == set(ran_on) != {threading.get_ident()}
        processor.stop()
    finally:
        registry.unregister("probe_reported")
