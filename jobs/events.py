"""The Redis publisher of job events, a subscriber of `jobs.notifier`: the console's live
updates and the SSE stream (`jobs.live`) read them from the channel.

Publishing never raises: jobs keep running while Redis is away, and events resume when it
is back. After a failed publish the bus stays quiet for `RETRY_AFTER_SECONDS` so that a
dead Redis does not cost every transition a connect timeout.

A committed transition does not wait for Redis either: `publish_batch` hands its events to
the process's one `BackgroundPublisher` thread (a `jobs.handoff.Handoff`), which drains
everything queued since its last command and publishes it with one command, in the order it
was committed. Woken by the first event, it waits `LINGER_SECONDS` for what commits
meanwhile to join: so single enqueues one after another cost Redis one command per 5 ms,
not one per job (one per job was a quarter of an enqueue's time, in the thread's Python and
Redis's CPU). The queue is bounded, and it is flushed at process exit (`flush()`, also for
tests).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import redis
from django.conf import settings

from .handoff import Handoff
from .notifier import Batch
from .reconnect import Backoff
from .representation import EncodedJob

logger = logging.getLogger(__name__)

JOB_EVENT_TYPES = (
    "job.created",
    "job.started",
    "job.completed",
    "job.failed",
    "job.cancelled",
    "job.retry_scheduled",
    "job.dlq_entry",
)
STATS_UPDATED = "stats.updated"
EVENT_TYPES = (*JOB_EVENT_TYPES, STATS_UPDATED)


class Event(dict[str, Any]):
    """`{"type": ..., "data": {...}}`, the wire form on the channel."""

    @property
    def type(self) -> str:
        return str(self["type"])

    @property
    def data(self) -> dict[str, Any]:
        return dict(self["data"])


class RedisEventBus:
    RETRY_AFTER_SECONDS = 2.0

    def __init__(self, url: str, channel: str) -> None:
        self.url = url
        self.channel = channel
        self._client = redis.Redis.from_url(
            url, socket_connect_timeout=0.5, socket_timeout=1.0, health_check_interval=30
        )
        self._quiet_until = 0.0
        # A fixed quiet period: events resume within it once Redis is back.
        self._backoff = Backoff(self.RETRY_AFTER_SECONDS, self.RETRY_AFTER_SECONDS)
        self._lock = threading.Lock()

    def publish(self, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([(event_type, data)])

    def publish_many(self, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        messages = [encode_event(event_type, data) for event_type, data in events]
        if not messages or time.monotonic() < self._quiet_until:
            return
        try:
            with self._lock:
                self._client.publish(self.channel, encode_batch(messages))
            self._backoff.succeeded()
        except redis.RedisError as exc:
            self._quiet_until = time.monotonic() + self._backoff.failed()
            logger.warning("event publish failed, %d events dropped: %s", len(messages), exc)


def encode_event(event_type: str, data: dict[str, Any]) -> str:
    if isinstance(data, EncodedJob):
        return f"{_event_head(event_type)}{data.text}}}"
    return json.dumps({"type": event_type, "data": data}, separators=(",", ":"), default=str)


@functools.cache
def _event_head(event_type: str) -> str:
    # Encoded once per type: a job object's event is otherwise only a concatenation.
    return f'{{"type":{json.dumps(event_type)},"data":'


# The channel carries one message per batch, a JSON array of its events in order: one
# PUBLISH, and one message for each subscriber to read. A Lua loop over PUBLISH sent one
# message per event, and redis-py packed each as an argument of the command in Python: of
# 3.5-4.0 us of the publisher's CPU per event, 1.6-1.8 went (1,000 events a command).
def encode_batch(messages: Sequence[str]) -> str:
    """One channel message of events each encoded by `encode_event`, in order."""
    return "[" + ",".join(messages) + "]"


def decode_events(raw: bytes | str) -> list[Event]:
    """The events of one channel message: a batch (an array), or one event (an object).
    Raises ValueError when it is not JSON, TypeError when it is no event or list of them."""
    decoded = json.loads(raw)
    if not isinstance(decoded, list):
        decoded = [decoded]
    events = []
    for event in decoded:
        if not isinstance(event, dict):
            raise TypeError(f"not an event: {event!r:.200}")
        events.append(Event(event))
    return events


_bus: RedisEventBus | None = None
_bus_lock = threading.Lock()


def get_event_bus() -> RedisEventBus:
    global _bus
    with _bus_lock:
        if _bus is None or (_bus.url, _bus.channel) != (
            settings.REDIS_URL,
            settings.SCHEDULER_EVENTS_CHANNEL,
        ):
            _bus = RedisEventBus(settings.REDIS_URL, settings.SCHEDULER_EVENTS_CHANNEL)
        return _bus


class BackgroundPublisher(Handoff[tuple[str, dict[str, Any]]]):
    """The thread that publishes this process's events, many per Redis command, in order."""

    THREAD_NAME = "event-publisher"
    MAX_QUEUED = 100_000  # events; beyond this, new ones are dropped (Redis stalled)
    MAX_PER_DELIVERY = 1_000
    # How long the first event of a command waits for others: live updates come that much
    # later, and a busy process publishes at most 200 commands a second.
    LINGER_SECONDS = 0.005
    WHAT = "events"

    def deliver(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        # The bus logs Redis errors itself, and never raises for them.
        get_event_bus().publish_many(items)


background_publisher = BackgroundPublisher()
atexit.register(background_publisher.flush)
os.register_at_fork(after_in_child=background_publisher.forget_parent)


def publish_batch(batch: Batch) -> None:
    """The notifier's subscriber: a committed transition's events, queued for publication."""
    background_publisher.submit(batch.events)
