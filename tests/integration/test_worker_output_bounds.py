"""What a job's code makes is stored in bounded size: a long error message leaves the stack
trace's frames in, log lines are cut and counted, and a result over
SCHEDULER_MAX_RESULT_BYTES fails its attempt. A worker run in this process, on the test
database and Redis; what is checked is what the API and the console show."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from jobs import state
from jobs.models import JobLog
from jobs.registry import JobContext, registry
from worker.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024


def parse_reply(length: int) -> None:
    raise ValueError("F" * length)


def long_failure(job: JobContext) -> None:
    """Fail with a message of `length` characters, caused by another as long: a library's
    error quoting a whole response body."""
    length = job.payload["length"]
    try:
        parse_reply(length)
    except ValueError as cause:
        raise RuntimeError("E" * length) from cause


def chatty(job: JobContext) -> None:
    """Log `lines` numbered lines, half of them after `pause` seconds (past the worker's
    once-a-second write of a running attempt's lines); then one of `width` characters."""
    lines = job.payload.get("lines", 0)
    for number in range(lines):
        if number == lines // 2:
            time.sleep(job.payload.get("pause", 0))
        job.logger.info("line %d", number)
    if width := job.payload.get("width"):
        job.logger.info("x" * width)


def sized_result(job: JobContext) -> str:
    """Return `count` times "é": 2 + 2 * count bytes as JSON in UTF-8."""
    return "é" * job.payload["count"]


HANDLERS = {"long_failure": long_failure, "chatty": chatty, "sized_result": sized_result}


@pytest.fixture(autouse=True)
def bounded_handlers() -> Iterator[None]:
    for name, function in HANDLERS.items():
        registry.register(name)(function)
    yield
    for name in HANDLERS:
        registry.unregister(name)


def run_once() -> None:
    assert Worker(once=True).run() == 0


def test_a_long_error_message_is_cut_and_the_stack_trace_keeps_its_frames(viewer_client):
    job = state.enqueue("long_failure", {"length": 1_000_000}, max_retries=1)
    run_once()

    (attempt,) = viewer_client.get(f"/api/v1/jobs/{job['id']}/attempts").json()
    assert attempt["error_type"] == "RuntimeError"
    assert attempt["error_message"] == "E" * 4000 + "… (996,000 characters cut)"
    trace = attempt["stack_trace"]
    # Both exceptions' frames, down to the lines that raised.
    for frame in ("in long_failure", "in parse_reply", 'raise ValueError("F" * length)'):
        assert frame in trace, trace[:2000]
    assert "The above exception was the direct cause of the following exception" in trace
    # Each message cut where it stands, saying how much of it was.
    assert re.search(r"\nValueError: F+… \(996,012 characters cut\)\n", trace), trace[-5000:]
    assert re.search(r"\nRuntimeError: E+… \(996,014 characters cut\)\n", trace), trace[-5000:]
    assert len(trace) < 20_000


def test_an_attempt_keeps_its_first_10000_log_lines_and_says_how_many_it_dropped(
    superuser_client,
):
    job = state.enqueue("chatty", {"lines": 12_000, "pause": 1.2})
    run_once()

    lines = list(JobLog.objects.filter(job_id=job["id"]).order_by("created_at", "id"))
    assert [line.message for line in lines[:-1]] == [f"line {n}" for n in range(10_000)]
    dropped = "2,000 more log lines were dropped: an attempt keeps its first 10,000."
    assert (lines[-1].level, lines[-1].message) == ("WARNING", dropped)
    page = superuser_client.get(f"/jobs/{job['id']}")
    assert dropped in page.content.decode()


def test_a_long_log_line_is_cut_saying_by_how_much(superuser_client):
    job = state.enqueue("chatty", {"lines": 1, "width": 1_000_000})
    run_once()

    lines = list(JobLog.objects.filter(job_id=job["id"]).order_by("created_at", "id"))
    assert [line.message for line in lines] == [
        "line 0",
        "x" * 10_000 + "… (990,000 characters cut)",
    ]
    page = superuser_client.get(f"/jobs/{job['id']}")
    assert page.status_code == 200
    assert len(page.content) < 100_000


def test_a_result_over_the_limit_fails_its_attempt_naming_its_size_and_the_setting(
    viewer_client,
):
    # In bytes of UTF-8, not characters: "é" is two. A result of exactly the limit is stored.
    fits = state.enqueue("sized_result", {"count": (MIB - 2) // 2})
    too_big = state.enqueue("sized_result", {"count": (MIB - 2) // 2 + 1}, max_retries=2)
    run_once()

    stored = viewer_client.get(f"/api/v1/jobs/{fits['id']}").json()
    assert (stored["status"], stored["result"]) == ("completed", "é" * ((MIB - 2) // 2))
    refused = viewer_client.get(f"/api/v1/jobs/{too_big['id']}").json()
    # It failed as any attempt does: waiting for its retry (not in the DLQ), no result stored.
    assert (refused["status"], refused["in_dlq"], refused["attempt_count"]) == ("failed", False, 1)
    assert refused["result"] is None
    (attempt,) = viewer_client.get(f"/api/v1/jobs/{too_big['id']}/attempts").json()
    assert attempt["error_type"] == "JsonLimitError"
    assert attempt["error_message"] == (
        "result is 1,048,578 bytes as JSON, over SCHEDULER_MAX_RESULT_BYTES (1,048,576)."
    )
    assert refused["last_error"] == attempt["error_message"]
