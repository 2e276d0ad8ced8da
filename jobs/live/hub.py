"""One Redis subscription per server process, fanned out to every connected SSE client.

The hub lives in the ASGI server's event loop. The first client starts a reader task that
subscribes to `settings.SCHEDULER_EVENTS_CHANNEL`, and the keep-alive beat; when the last
client leaves both stop, so an idle server holds no subscription, no task and no timer. Each
message is decoded and rendered as an SSE frame once, then handed to every client's bounded
queue: a client that falls `SSE_CLIENT_QUEUE_SIZE` frames behind is dropped (and told so)
rather than slowing the others down or growing the server's memory.

A job's events come from several processes (the web's `job.created`, a worker's
`job.started` a millisecond later), each publishing after a linger of its own
(`jobs.events.BackgroundPublisher`): a worker's could overtake the web's, and a client that
keeps each job's last event showed a finished job as pending. So job events are held
`HOLD_SECONDS` and sent in the order of their transitions (the job object's `updated_at`,
the database's clock, then the life cycle's order within a millisecond).

`stats.updated` from the channel only says that the counters moved: the hub reads them
itself, at most once per `SCHEDULER_STATS_INTERVAL`, one read after another. Forwarded as
published, they came from every process's publisher, more often than the interval, and a
snapshot read earlier but published later made the counters step back.

When Redis goes away the reader tells every client (`stream.status` `{"redis": "down"}`),
retries with jittered exponential backoff, and on success says `{"redis": "up"}` followed
by a fresh `stats.updated`, since whatever happened meanwhile was not seen.

Each keep-alive beat also checks again what let each stream in (`jobs.live.credentials`),
all streams in one go, and ends those whose token was revoked, whose user was deactivated or
whose session ended: their events stop within `SSE_KEEPALIVE_SECONDS`, and EventSource's
reconnect is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings
from django.db import DatabaseError
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from jobs.events import JOB_EVENT_TYPES, STATS_UPDATED, decode_events
from jobs.reconnect import Backoff
from jobs.stats import current_stats

from .credentials import Credential, still_held
from .db import read_and_release

logger = logging.getLogger(__name__)

STREAM_STATUS = "stream.status"
STREAM_DROPPED = "stream.dropped"
KEEPALIVE = b": keep-alive\n\n"
# Within one millisecond of `updated_at`, a job is created, then started, then the rest (2);
# another event follows the job events held when it came (3).
LIFE_ORDER = {"job.created": 0, "job.started": 1}


def frame(event_type: str, data: Any) -> bytes:
    """One SSE event. Compact JSON never contains a newline, so `data:` is one line."""
    payload = json.dumps(data, separators=(",", ":"), default=str)
    return f"event: {event_type}\ndata: {payload}\n\n".encode()


class Client:
    """One connected stream: the frames not yet sent, and who sends them.

    An open stream costs what it holds, and a burst of them leaves the process's memory at its
    high-water mark (freed Python objects are reused, not returned): a list of pending frames
    rather than an `asyncio.Queue` (four deques), no timer of its own (the hub's keep-alive
    beat reaches it), and nothing waiting for frames: the hub calls `deliver` each time it
    queues some or closes the client, and the stream sends them from that call
    (`jobs.live.handler.EventWriter`).
    """

    __slots__ = ("closed", "credential", "deliver", "dropped", "frames")

    def __init__(
        self, deliver: Callable[[Client], None], credential: Credential | None = None
    ) -> None:
        self.frames: list[bytes] = []
        # Set with the farewell frame of a dropped client: the stream ends after sending it.
        self.closed = False
        self.dropped = False
        self.deliver = deliver
        # Checked on each keep-alive beat; None for a client that is not a request's.
        self.credential = credential

    def take(self) -> bytes:
        """The frames queued so far, in one chunk (empty for a closed client with none)."""
        frames, self.frames = self.frames, []
        return b"".join(frames)


class EventHub:
    RETRY_MIN_SECONDS = 0.5
    RETRY_MAX_SECONDS = 5.0
    # With no traffic at all for PING_SECONDS the reader pings; a connection that stays
    # silent for 3 x PING_SECONDS is treated as lost (a half-open socket never errors).
    PING_SECONDS = 5.0
    READ_SECONDS = 1.0
    # How long a job event waits for an earlier transition's event published by another
    # process: beyond each publisher's 5 ms linger, with room for a busy machine.
    HOLD_SECONDS = 0.025

    def __init__(self, url: str, channel: str, queue_size: int, keepalive_seconds: float) -> None:
        self.url = url
        self.channel = channel
        self.queue_size = max(queue_size, 1)
        self.keepalive_seconds = keepalive_seconds
        self.loop = asyncio.get_running_loop()
        self.redis_up: bool | None = None
        self._clients: set[Client] = set()
        self._beat: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._backoff = Backoff(self.RETRY_MIN_SECONDS, self.RETRY_MAX_SECONDS, jitter=0.2)
        # Job events held: (updated_at, life order, arrival number, arrival time, frame).
        self._held: list[tuple[str, int, int, float, bytes]] = []
        self._arrivals = itertools.count()
        self._release_timer: asyncio.TimerHandle | None = None
        self._stats_reader: asyncio.Task[None] | None = None
        self._stats_moved = False
        self._credentials_check: asyncio.Task[None] | None = None

    # --- clients --------------------------------------------------------------------------

    def join(
        self, deliver: Callable[[Client], None], credential: Credential | None = None
    ) -> Client:
        """A new client; `deliver` is called with it whenever frames are queued for it or it
        is closed, and must not raise. One with a `credential` is closed, without the frames
        still queued for it, once a keep-alive beat finds that the credential no longer holds."""
        client = Client(deliver, credential)
        self._clients.add(client)
        if self._beat is None:
            self._beat = self.loop.call_later(self.keepalive_seconds, self._keepalive)
        if self._task is None or self._task.done():
            self._settled = asyncio.Event()
            self._task = self.loop.create_task(self._run(self._stopping), name="sse-hub-reader")
        return client

    def leave(self, client: Client) -> None:
        self._clients.discard(client)
        if not self._clients and self._beat is not None:
            self._beat.cancel()
            self._beat = None
        if not self._clients and self._stats_reader is not None:
            self._stats_reader.cancel()
            self._stats_reader = None
        if not self._clients and self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
            self._held.clear()
        if not self._clients and self._task is not None:
            # The next reader waits for this one to finish closing its connection, so the
            # process never holds two subscriptions at once.
            self._task.cancel()
            self._stopping, self._task = self._task, None
            self._stopping.add_done_callback(self._stopped)
            self.redis_up = None

    def _stopped(self, reader: asyncio.Task[None]) -> None:
        # A cancelled task keeps its CancelledError, whose traceback holds the reader's
        # frames and their Redis client: forgotten once it has closed, rather than kept
        # until the next reader starts (a burst's last objects, they would pin its memory).
        if self._stopping is reader:
            self._stopping = None

    async def wait_settled(self, timeout: float) -> None:
        """Wait until the reader has subscribed or failed once, so that a new client's
        first `stats.updated` is not older than the events that follow it."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout)

    def counts(self) -> dict[str, Any]:
        return {
            "clients": len(self._clients),
            "queued_frames": sum(len(c.frames) for c in self._clients),
            "reader_running": self._task is not None and not self._task.done(),
            "stopping_reader": self._stopping is not None and not self._stopping.done(),
            "redis": {None: "unknown", True: "up", False: "down"}[self.redis_up],
            "asyncio_tasks": len(asyncio.all_tasks(self.loop)),
        }

    def broadcast(self, data: bytes) -> None:
        for client in list(self._clients):
            if len(client.frames) >= self.queue_size:
                self._drop(client)
            else:
                client.frames.append(data)
                client.deliver(client)

    def _keepalive(self) -> None:
        # One beat for every client, which traffic does not postpone: each stream gets a
        # keep-alive at least every keepalive_seconds, without a timer per stream.
        self._beat = self.loop.call_later(self.keepalive_seconds, self._keepalive)
        self.broadcast(KEEPALIVE)
        self._check_credentials()

    def _check_credentials(self) -> None:
        if self._credentials_check is not None and not self._credentials_check.done():
            return  # the last beat's check is still waiting for the database
        checked = {c: c.credential for c in self._clients if c.credential is not None}
        if checked:
            self._credentials_check = self.loop.create_task(
                self._close_revoked(checked), name="sse-hub-credentials"
            )

    async def _close_revoked(self, checked: dict[Client, Credential]) -> None:
        try:
            held = await read_and_release(still_held, set(checked.values()))
        except DatabaseError as exc:
            # No job changes while the database is away, so nothing is withheld by waiting:
            # the next beat checks again.
            logger.warning("SSE hub could not check the streams' credentials: %s", exc)
            return
        for client, credential in checked.items():
            if credential not in held and client in self._clients:
                client.closed = True
                client.frames = []
                client.deliver(client)
                self.leave(client)

    def close_all(self) -> None:
        """End every stream after the frames queued for it: the server is stopping. A browser
        reconnects by itself (the stream's `retry`) to a server that is still serving."""
        while self._held:
            self.broadcast(heapq.heappop(self._held)[4])
        for client in list(self._clients):
            client.closed = True
            client.deliver(client)
            self.leave(client)

    def _drop(self, client: Client) -> None:
        logger.warning("SSE client dropped: %d frames behind", len(client.frames))
        client.dropped = client.closed = True
        client.frames = [frame(STREAM_DROPPED, {"reason": "client_too_slow"})]
        client.deliver(client)
        self.leave(client)

    # --- the reader -----------------------------------------------------------------------

    async def _run(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        while True:
            try:
                await self._listen()
            except Exception as exc:
                # Anything that breaks the subscription (Redis gone, a bug in a frame) must
                # not leave the clients waiting on a dead reader: report, wait, resubscribe.
                if not isinstance(exc, RedisError | OSError):
                    logger.exception("SSE hub reader failed")
                if self.redis_up is not False:
                    logger.warning("SSE hub lost Redis, retrying: %s", exc)
                    self.redis_up = False
                    self.broadcast(frame(STREAM_STATUS, {"redis": "down"}))
                self._settled.set()
            await asyncio.sleep(self._backoff.failed())

    async def _listen(self) -> None:
        client = aioredis.Redis.from_url(
            self.url, socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0)
        )
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel)
            recovered = self.redis_up is False
            self.redis_up = True
            self._backoff.succeeded()
            self._settled.set()
            if recovered:
                logger.info("SSE hub resubscribed to Redis")
                self.broadcast(frame(STREAM_STATUS, {"redis": "up"}))
                await self._broadcast_stats()
            await self._read(pubsub)
        finally:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()

    async def _read(self, pubsub: aioredis.client.PubSub) -> None:
        last_seen = last_ping = self.loop.time()
        while True:
            message = await pubsub.get_message(timeout=self.READ_SECONDS)
            now = self.loop.time()
            if message is None:
                if now - last_seen > 3 * self.PING_SECONDS:
                    raise ConnectionError("Redis stopped answering pings")
                if now - last_ping > self.PING_SECONDS:
                    await pubsub.ping()
                    last_ping = now
                continue
            last_seen = now
            if message["type"] == "message":
                self._on_message(message["data"])

    def _on_message(self, raw: bytes) -> None:
        try:
            events = decode_events(raw)
        except (ValueError, TypeError):
            logger.warning("SSE hub ignored a malformed message: %.200r", raw)
            return
        for event in events:
            try:
                event_type, data = event["type"], event["data"]
            except KeyError:
                logger.warning("SSE hub ignored a malformed event: %.200r", event)
                continue
            if not isinstance(event_type, str) or "\n" in event_type or "\r" in event_type:
                logger.warning("SSE hub ignored an event with a bad type: %.200r", event)
                continue
            updated_at = data.get("updated_at") if isinstance(data, dict) else None
            if event_type in JOB_EVENT_TYPES and isinstance(updated_at, str):
                self._hold(updated_at, LIFE_ORDER.get(event_type, 2), frame(event_type, data))
            elif event_type == STATS_UPDATED:
                self._stats_changed()
            else:
                self._after_held(frame(event_type, data))

    def _after_held(self, data: bytes) -> None:
        """Send `data` after the job events held so far (stats.updated counts them)."""
        if self._held:
            self._hold(max(held[0] for held in self._held), 3, data)
        else:
            self.broadcast(data)

    def _hold(self, updated_at: str, order: int, data: bytes) -> None:
        arrival = (updated_at, order, next(self._arrivals), self.loop.time(), data)
        heapq.heappush(self._held, arrival)
        if self._release_timer is None:
            self._release_timer = self.loop.call_later(self.HOLD_SECONDS, self._release)

    def _release(self) -> None:
        """Send, earliest transition first, the held events as long as the earliest has been
        held its time: one published later by another process, but earlier, goes first."""
        self._release_timer = None
        now = self.loop.time()
        while self._held and self._held[0][3] + self.HOLD_SECONDS <= now:
            self.broadcast(heapq.heappop(self._held)[4])
        if self._held:
            wait = self._held[0][3] + self.HOLD_SECONDS - now
            self._release_timer = self.loop.call_later(wait, self._release)

    def _stats_changed(self) -> None:
        if self._stats_reader is not None and not self._stats_reader.done():
            self._stats_moved = True  # read again once the interval is over
            return
        self._stats_reader = self.loop.create_task(self._read_stats(), name="sse-hub-stats")

    async def _read_stats(self) -> None:
        self._stats_moved = True
        while self._stats_moved and self._clients:
            self._stats_moved = False
            began = self.loop.time()
            await self._broadcast_stats()
            await asyncio.sleep(settings.SCHEDULER_STATS_INTERVAL - (self.loop.time() - began))

    async def _broadcast_stats(self) -> None:
        try:
            stats = await read_and_release(current_stats)
        except DatabaseError as exc:
            logger.warning("SSE hub could not read the job counters: %s", exc)
            return
        self._after_held(frame(STATS_UPDATED, stats))


_hub: EventHub | None = None


def close_streams() -> None:
    """End the streams of the running event loop's hub, if it has one (its server stops)."""
    if _hub is not None and _hub.loop is asyncio.get_running_loop():
        _hub.close_all()


def get_hub() -> EventHub:
    """The hub of this process's running event loop (a new loop gets a new hub)."""
    global _hub
    loop = asyncio.get_running_loop()
    if _hub is None or _hub.loop is not loop:
        _hub = EventHub(
            settings.REDIS_URL,
            settings.SCHEDULER_EVENTS_CHANNEL,
            settings.SSE_CLIENT_QUEUE_SIZE,
            settings.SSE_KEEPALIVE_SECONDS,
        )
    return _hub
