"""The Redis publisher of job events, a subscriber of `jobs.notifier`: the console's live
updates and the SSE stream (`jobs.live`) read them from the channel.

Publishing never raises: jobs keep running while Redis is away, and events resume when it
is back. After a failed publish the bus stays quiet for `RETRY_AFTER_SECONDS` so that a
dead Redis does not cost every transition a connect timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import redis
from django.conf import settings

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


# One command for a whole batch: a pipeline of PUBLISH costs a command and a reply per event,
# which was about twice the time of this script for the worker's batches of 100.
_PUBLISH_ALL = "for i = 1, #ARGV do redis.call('PUBLISH', KEYS[1], ARGV[i]) end return #ARGV"


class RedisEventBus:
    RETRY_AFTER_SECONDS = 2.0

    def __init__(self, url: str, channel: str) -> None:
        self.url = url
        self.channel = channel
        self._client = redis.Redis.from_url(
            url, socket_connect_timeout=0.5, socket_timeout=1.0, health_check_interval=30
        )
        self._publish_all = self._client.register_script(_PUBLISH_ALL)
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
                self._publish_all(keys=[self.channel], args=messages)
            self._backoff.succeeded()
        except redis.RedisError as exc:
            self._quiet_until = time.monotonic() + self._backoff.failed()
            logger.warning("event publish failed, %d events dropped: %s", len(messages), exc)


def encode_event(event_type: str, data: dict[str, Any]) -> str:
    if isinstance(data, EncodedJob):
        return f'{{"type":{json.dumps(event_type)},"data":{data.text}}}'
    return json.dumps({"type": event_type, "data": data}, separators=(",", ":"), default=str)


def decode_event(raw: bytes | str) -> Event:
    return Event(json.loads(raw))


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


def publish_batch(batch: Batch) -> None:
    """The notifier's subscriber: a committed transition's events, in one command."""
    get_event_bus().publish_many(batch.events)
