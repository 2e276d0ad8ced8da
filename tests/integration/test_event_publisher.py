"""The process's background event publisher: single enqueues do not wait for Redis, and a
burst of them reaches the channel whole and in order, in fewer Redis commands than jobs."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from jobs import state
from jobs.events import BackgroundPublisher, RedisEventBus, background_publisher
from jobs.stats import stats_publisher
from scheduler_project.devservices.redis_server import EmbeddedRedis
from tests.conftest import EventListener

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def private_redis(tmp_path: Path, settings: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A Redis of this test's own, so that its command counts are this test's only."""
    # The coalesced stats.updated of an earlier test's enqueues goes out now, to the shared
    # Redis, rather than a second later into this test's commands.
    stats_publisher.flush()
    background_publisher.flush()
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    settings.REDIS_URL = server.url  # type: ignore[attr-defined]
    client = redis.Redis.from_url(server.url)
    try:
        yield client
    finally:
        stats_publisher.flush()
        background_publisher.flush()
        client.close()
        server.stop()


def publish_commands(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_publish", {}).get("calls", 0))


def test_a_burst_of_enqueues_publishes_every_job_created_in_order_in_fewer_commands(
    private_redis: redis.Redis,
) -> None:
    listener = EventListener(settings.REDIS_URL, settings.SCHEDULER_EVENTS_CHANNEL)
    time.sleep(0.05)  # the SUBSCRIBE must be in place before the burst
    try:
        private_redis.config_resetstat()
        # Redis holds publications for 0.7 s (less than the bus's 1 s socket timeout), as a
        # busy Redis would. The burst runs within that pause, so however fast or loaded the
        # machine, every event after the first one queues up behind a single command.
        private_redis.client_pause(700, all=False)
        burst_ends = time.monotonic() + 0.4
        created = []
        while len(created) < 500 and time.monotonic() < burst_ends:
            created.append(state.enqueue("noop", {"n": len(created)}))
        assert background_publisher.flush(timeout=10)
        listener.wait_for("job.created", lambda data: data["id"] == created[-1]["id"])
    finally:
        listener.close()

    received = [event["data"] for event in listener.received if event["type"] == "job.created"]
    assert received == created
    # The first command, then the rest in one or a few.
    assert len(created) > 4
    assert 0 < publish_commands(private_redis) <= 4


def test_events_queued_while_the_publisher_lingers_go_out_in_one_command(
    private_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One enqueue after another, each event alone in its command, was a quarter of an
    # enqueue's time. Ten submissions a few milliseconds apart, as single enqueues come,
    # within a linger made long (a second) so that a busy machine cannot split them.
    assert background_publisher.flush()
    monkeypatch.setattr(BackgroundPublisher, "LINGER_SECONDS", 1.0)
    commands: list[int] = []
    publish_many = RedisEventBus.publish_many

    def counted(bus: RedisEventBus, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        events = list(events)
        commands.append(len(events))
        publish_many(bus, events)

    monkeypatch.setattr(RedisEventBus, "publish_many", counted)
    for n in range(10):
        background_publisher.submit([("job.created", {"n": n})])
        time.sleep(0.005)
    assert background_publisher.flush(timeout=10)
    assert commands == [10]
