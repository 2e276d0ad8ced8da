"""A listener's (re)connect asks for a feed, unless a feed already began after its LISTEN."""

from __future__ import annotations

import time

from worker.worker import Worker


def feed_due_after(worker: Worker, listening_since: float) -> float:
    feed = worker._units[2]
    assert feed.unit is worker.feeder
    feed.due = time.monotonic() + 30
    worker.inbox.put(("feed", listening_since))
    worker._receive(0)
    return feed.due


def test_a_reconnect_before_any_feed_asks_for_one(worker):
    assert feed_due_after(worker, time.monotonic()) == 0.0


def test_a_reconnect_after_the_last_feed_began_asks_for_one(worker):
    worker.feeder.started_at = time.monotonic()
    assert feed_due_after(worker, worker.feeder.started_at + 0.001) == 0.0


def test_a_feed_begun_after_the_listen_took_effect_is_not_repeated(worker):
    listening_since = time.monotonic()
    worker.feeder.started_at = listening_since + 0.001
    assert feed_due_after(worker, listening_since) > time.monotonic()
