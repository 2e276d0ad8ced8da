"""Fixtures of the worker's unit tests: its loop driven through its inbox, nothing started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from worker.worker import Worker


@pytest.fixture
def worker() -> Iterator[Worker]:
    """A worker of one handler thread with its units built; no thread of its own started."""
    worker = Worker(concurrency=1)
    worker._build_units()
    yield worker
    worker.processor.stop()
