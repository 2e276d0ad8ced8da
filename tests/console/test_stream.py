"""The SSE stream, served by a real daphne process against the test database (and, for the
capacity test, also by the production server: gunicorn with one uvicorn worker).

Events are produced the way production produces them: transitions of `jobs.state` in this
process publish on Redis after commit, and the server's hub fans them out.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client as DjangoClient
from django.utils import timezone

from benchmarks.api_load import Daphne, ProductionServer, named, server_connections
from jobs import state
from jobs.api.auth import issue_token
from jobs.events import JOB_EVENT_TYPES, RedisEventBus, get_event_bus
from jobs.live.hub import Client, EventHub
from jobs.models import ApiToken, Job, Worker
from jobs.stats import current_stats
from scheduler_project.devservices.processes import free_port
from tests.attempts import fail_attempt
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


# --- a real server and a real client ----------------------------------------------------------


class JsonReader:
    port: int

    def get_json(self, path: str, token: str) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()


class Server(JsonReader, Daphne):
    # daphne forgets a closed connection (its request, queue and finished application task,
    # several kB each) only when its application_checker next runs, once a second.
    seconds_to_forget_closed = 2.0

    @property
    def serving_pid(self) -> int:
        return self.process.pid


class OneWorkerProductionServer(JsonReader, ProductionServer):
    """`make prod`'s server with a single uvicorn worker, so that every stream is in it."""

    # uvicorn forgets a connection as it closes.
    seconds_to_forget_closed = 0.0

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        super().__init__(env, log_path, workers=1)

    @property
    def serving_pid(self) -> int:
        (pid,) = re.findall(r"Started server process \[(\d+)\]", self.log())
        return int(pid)


class SseClient:
    """Reads the stream block by block; remembers every block with its arrival time."""

    def __init__(
        self, port: int, path: str = "/api/jobs/stream", headers: dict[str, str] | None = None
    ) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.conn.request("GET", path, headers=headers or {})
        self.response = self.conn.getresponse()
        self.blocks: list[dict[str, Any]] = []

    def read_block(self, timeout: float = 10.0) -> dict[str, Any]:
        assert self.conn.sock is not None
        self.conn.sock.settimeout(timeout)
        block: dict[str, Any] = {"comments": [], "event": None, "data": None}
        while True:
            line = self.response.readline()
            if not line:
                raise AssertionError("the server closed the stream")
            text = line.decode().rstrip("\n")
            if text == "":
                if block["comments"] or block["event"] or block["data"] or "retry" in block:
                    block["at"] = time.monotonic()
                    self.blocks.append(block)
                    return block
                continue
            name, _, value = text.partition(":")
            value = value.removeprefix(" ")
            if name == "":
                block["comments"].append(value)
            elif name == "data":
                block["data"] = json.loads(value)
            else:
                block[name] = value

    def next_event(self, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            block = self.read_block(max(deadline - time.monotonic(), 0.01))
            if block["event"] is not None:
                return block

    def events_until(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while not done(seen):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"stream gave only {[e['event'] for e in seen]}")
            seen.append(self.next_event(remaining))
        return seen

    def read_to_end(self, timeout: float = 10.0) -> None:
        """Read until the server ends the stream."""
        assert self.conn.sock is not None
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            self.conn.sock.settimeout(remaining)
            try:
                if not self.response.readline():
                    return
            except TimeoutError:
                break
        raise AssertionError("the server kept the stream open")

    def close(self) -> None:
        self.response.close()
        self.conn.close()


@pytest.fixture
def start_server(subprocess_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(**extra_env: str) -> Server:
        server = Server({**subprocess_env, **extra_env}, tmp_path / f"daphne-{len(servers)}.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def token() -> str:
    user = get_user_model().objects.create_user(username="sse-reader", password="pw-sse-reader")
    return issue_token(user)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_worker() -> uuid.UUID:
    now = timezone.now()
    return Worker.objects.create(hostname="test", pid=1, started_at=now, heartbeat_at=now).id


def last_is(event_type: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda seen: bool(seen) and seen[-1]["event"] == event_type


def job_events_for(events: list[dict[str, Any]], job_id: str) -> list[str]:
    return [
        e["event"] for e in events if e["event"] in JOB_EVENT_TYPES and e["data"]["id"] == job_id
    ]


# --- authentication ----------------------------------------------------------------------------


def test_the_stream_refuses_anonymous_and_bad_tokens(start_server: Callable[..., Server]) -> None:
    server = start_server()
    for path in ["/api/jobs/stream", "/api/v1/jobs/stream", "/api/jobs/stream/status"]:
        for headers in [
            {},
            {"Authorization": "Bearer jsk_not-a-token"},
            {"Authorization": "Basic x"},
        ]:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = json.loads(response.read())
            conn.close()

            assert response.status == 401, (path, headers)
            assert response.getheader("Content-Type") == "application/json"
            assert body["error"]["code"] == "not_authenticated"
            assert body["error"]["message"]
            assert response.getheader("X-Request-ID")


def test_a_console_session_may_read_the_v1_stream(start_server: Callable[..., Server]) -> None:
    user = get_user_model().objects.create_user(username="console-user")
    browser = DjangoClient()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    server = start_server()

    stream = SseClient(server.port, "/api/v1/jobs/stream", {"Cookie": cookie})
    try:
        assert stream.response.status == 200
        assert stream.next_event()["event"] == "stats.updated"
    finally:
        stream.close()


def revoke_tokens(user: Any) -> None:
    ApiToken.objects.filter(user=user).delete()


def deactivate(user: Any) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


@pytest.mark.parametrize("revoke", [revoke_tokens, deactivate])
def test_a_stream_ends_once_its_token_no_longer_holds(
    start_server: Callable[..., Server], revoke: Callable[[Any], None]
) -> None:
    """The stream was authenticated only when it connected: after its token was revoked, or
    its user deactivated, it kept receiving every job object. Each keep-alive beat checks
    the credentials again; the other streams stay."""
    users = get_user_model().objects
    revoked_user, other_user = users.create_user("sse-revoked"), users.create_user("sse-other")
    revoked_token, other_token = issue_token(revoked_user), issue_token(other_user)
    server = start_server(SSE_KEEPALIVE_SECONDS="1")
    revoked = SseClient(server.port, headers=bearer(revoked_token))
    other = SseClient(server.port, headers=bearer(other_token))
    try:
        for stream in (revoked, other):
            assert stream.next_event()["event"] == "stats.updated"
        before = state.enqueue("noop", {"phase": "before"}, priority=2)
        assert revoked.events_until(last_is("job.created"))[-1]["data"] == before

        revoke(revoked_user)
        revoked.read_to_end()
        after = state.enqueue("noop", {"phase": "after"}, priority=2)
        # The same beat found the other stream's token valid.
        other.events_until(lambda seen: "job.created" in job_events_for(seen, after["id"]))
        status, body = server.get_json("/api/jobs/stream/status", revoked_token)
        assert (status, body["error"]["message"]) == (401, "Invalid or revoked token.")
    finally:
        revoked.close()
        other.close()


@pytest.mark.parametrize("ending", ["logout", "password change", "deactivation"])
def test_a_console_stream_ends_once_its_session_no_longer_holds(
    start_server: Callable[..., Server], ending: str
) -> None:
    """As for a token: after a logout (the session deleted), a password change (which ends
    the user's sessions) or a deactivation, the session's stream ends at the next beat."""
    user = get_user_model().objects.create_user(username="console-user", password="pw-console")
    browser = DjangoClient()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    server = start_server(SSE_KEEPALIVE_SECONDS="1")
    stream = SseClient(server.port, headers={"Cookie": cookie})
    try:
        assert stream.next_event()["event"] == "stats.updated"
        # The beats that find the session valid leave the stream open.
        keepalives = 0
        while keepalives < 2:
            keepalives += "keep-alive" in stream.read_block()["comments"]

        if ending == "logout":
            browser.logout()
        elif ending == "password change":
            user.set_password("pw-console-changed")
            user.save(update_fields=["password"])
        else:
            deactivate(user)
        stream.read_to_end()
    finally:
        stream.close()

    again = SseClient(server.port, headers={"Cookie": cookie})
    try:
        assert again.response.status == 401
    finally:
        again.close()


# --- what the stream says ---------------------------------------------------------------------


def test_stats_first_then_every_event_type_in_order_with_the_job_object(
    start_server: Callable[..., Server], token: str
) -> None:
    state.enqueue("noop", {}, priority=3)  # so the first stats are not all zero
    server = start_server()
    stream = SseClient(server.port, headers={**bearer(token), "X-Request-ID": "sse-test-1"})
    try:
        assert stream.response.status == 200
        assert stream.response.getheader("Content-Type") == "text/event-stream"
        assert stream.response.getheader("Cache-Control") == "no-cache"
        assert stream.response.getheader("X-Request-ID") == "sse-test-1"
        first = stream.next_event()
        assert first["event"] == "stats.updated"
        assert first["data"] == current_stats()
        assert first["data"]["pending"] == 1
        assert stream.blocks[0].get("retry") == "3000"

        worker_id = new_worker()
        done = state.enqueue("noop", {"n": 1}, priority=1)
        claimed = state.claim(worker_id, 1, [uuid.UUID(done["id"])])
        (completed,) = state.complete(
            [state.Success(claimed[0].id, claimed[0].attempt_id, {"ok": 1}, timezone.now())],
            worker_id,
        ).completed
        doomed = state.enqueue("noop", {"n": 2}, priority=1, max_retries=1)
        (attempt,) = state.claim(worker_id, 1, [uuid.UUID(doomed["id"])])
        in_dlq = fail_attempt(
            attempt.id,
            attempt.attempt_id,
            error_type="RuntimeError",
            error_message="boom",
            stack_trace=None,
            retry_delay=timedelta(seconds=1),
        )
        assert in_dlq is not None and in_dlq["in_dlq"]
        retried = state.retry_from_dlq(uuid.UUID(doomed["id"]))
        cancelled = state.cancel(uuid.UUID(doomed["id"]))

        # The counters follow the last change, at most SCHEDULER_STATS_INTERVAL after the
        # previous stats.updated of this process (another test's, perhaps): after the
        # cancel's event, not always before it.
        events = stream.events_until(
            lambda seen: (
                "job.cancelled" in job_events_for(seen, doomed["id"])
                and seen[-1]["event"] == "stats.updated"
            )
        )
    finally:
        stream.close()

    assert job_events_for(events, done["id"]) == ["job.created", "job.started", "job.completed"]
    assert job_events_for(events, doomed["id"]) == [
        "job.created",
        "job.started",
        "job.failed",
        "job.dlq_entry",
        "job.retry_scheduled",
        "job.cancelled",
    ]
    by_type = {(e["event"], e["data"].get("id")): e["data"] for e in events}
    assert by_type[("job.created", done["id"])] == done
    assert by_type[("job.completed", done["id"])] == completed
    assert by_type[("job.dlq_entry", doomed["id"])] == in_dlq
    assert by_type[("job.retry_scheduled", doomed["id"])] == retried
    assert by_type[("job.cancelled", doomed["id"])] == cancelled
    assert "stats.updated" in [e["event"] for e in events]
    # The last word on the counters matches the database once everything settled.
    last_stats = [e for e in events if e["event"] == "stats.updated"][-1]["data"]
    assert set(last_stats) == set(current_stats())


def test_a_keepalive_comment_at_least_every_interval_even_while_events_flow(
    start_server: Callable[..., Server], token: str
) -> None:
    server = start_server(SSE_KEEPALIVE_SECONDS="1")
    stream = SseClient(server.port, headers=bearer(token))
    try:
        started = stream.next_event()["at"]
        bus = get_event_bus()
        deadline = started + 4.5
        stop_traffic = threading.Event()

        def steady_traffic() -> None:
            # Steady traffic must not postpone the keep-alive.
            while not stop_traffic.wait(0.05):
                bus.publish("job.created", {"id": "keepalive-probe"})

        # The reader never waits on the publisher, so a block's arrival time is when the
        # server sent it, not when the publishing loop next got round to reading.
        traffic = threading.Thread(target=steady_traffic, daemon=True)
        traffic.start()
        try:
            while time.monotonic() < deadline:
                stream.read_block(timeout=2.0)
        finally:
            stop_traffic.set()
            traffic.join(5)
    finally:
        stream.close()

    keepalives = [b["at"] for b in stream.blocks if "keep-alive" in b["comments"]]
    assert len(keepalives) >= 3
    gaps = [b - a for a, b in zip([started, *keepalives], keepalives, strict=False)]
    # 1 s apart, with room for a busy machine; a keep-alive postponed by traffic would
    # leave a gap of the whole 4.5 s.
    assert max(gaps) < 1.9, gaps
    assert any(b["event"] == "job.created" for b in stream.blocks)


# --- one subscription per process, nothing left behind -----------------------------------------


def numsub(url: str, channel: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(dict(client.pubsub_numsub(channel))[channel.encode()])
    finally:
        client.close()


def test_many_clients_share_one_subscription_and_cycles_leave_nothing_behind(
    start_server: Callable[..., Server], token: str
) -> None:
    channel = settings.SCHEDULER_EVENTS_CHANNEL
    server = start_server()
    status, idle = server.get_json("/api/jobs/stream/status", token)
    assert status == 200
    assert idle["clients"] == 0 and not idle["reader_running"]
    assert numsub(settings.REDIS_URL, channel) == 0

    streams = [SseClient(server.port, headers=bearer(token)) for _ in range(5)]
    try:
        for stream in streams:
            assert stream.next_event()["event"] == "stats.updated"
        assert numsub(settings.REDIS_URL, channel) == 1
        _, busy = server.get_json("/api/jobs/stream/status", token)
        assert busy["clients"] == 5 and busy["reader_running"]
        created = state.enqueue("noop", {"fan": "out"}, priority=2)
        for stream in streams:
            event = stream.events_until(last_is("job.created"))[-1]
            assert event["data"] == created
    finally:
        for stream in streams:
            stream.close()

    subscriptions = set()
    for _ in range(100):
        stream = SseClient(server.port, headers=bearer(token))
        assert stream.next_event()["event"] == "stats.updated"
        subscriptions.add(numsub(settings.REDIS_URL, channel))
        stream.close()
    assert subscriptions <= {0, 1}

    deadline = time.monotonic() + 15
    while True:
        _, after = server.get_json("/api/jobs/stream/status", token)
        settled = (
            after["clients"] == 0
            and after["queued_frames"] == 0
            and not after["reader_running"]
            and not after["stopping_reader"]
            and after["asyncio_tasks"] <= idle["asyncio_tasks"]
            and numsub(settings.REDIS_URL, channel) == 0
        )
        if settled:
            break
        assert time.monotonic() < deadline, (after, idle)
        time.sleep(0.2)


async def published_to_a_hub(
    channel: str, messages: list[Any]
) -> tuple[EventHub, Client, asyncio.Event]:
    """A client of a hub of its own on `channel`, then each of `messages` published there;
    the event is set whenever frames are queued for the client."""
    hub = EventHub(settings.REDIS_URL, channel, queue_size=10, keepalive_seconds=60)
    delivered = asyncio.Event()
    client = hub.join(lambda _: delivered.set())
    await hub.wait_settled(5)
    publisher = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    for message in messages:
        await publisher.publish(channel, json.dumps(message))
    await publisher.aclose()
    return hub, client, delivered


def test_a_jobs_events_reach_a_client_in_the_order_of_its_transitions() -> None:
    """A worker's job.started and job.completed could reach the channel before the web
    process's job.created (each process publishes after a linger of its own): a client
    keeping each job's last event showed a finished job as pending."""
    channel = f"{settings.SCHEDULER_EVENTS_CHANNEL}:order:{uuid.uuid4().hex}"

    def event(event_type: str, job_id: str, updated_at: str) -> dict[str, Any]:
        return {"type": event_type, "data": {"id": job_id, "updated_at": updated_at}}

    # Arrived in this order; `updated_at` is each transition's time.
    arrived = [
        event("job.completed", "a", "2026-12-07T05:00:00.004Z"),
        event("job.started", "a", "2026-12-07T05:00:00.001Z"),
        event("job.created", "b", "2026-12-07T05:00:00.002Z"),
        event("job.created", "a", "2026-12-07T05:00:00.001Z"),  # the same millisecond
    ]

    async def scenario() -> list[tuple[str, str]]:
        hub, client, delivered = await published_to_a_hub(channel, [arrived])
        frames: list[bytes] = []
        while len(frames) < len(arrived):
            await asyncio.wait_for(delivered.wait(), 5)
            delivered.clear()
            frames += client.take().split(b"\n\n")[:-1]
        hub.leave(client)
        sent = [block.decode().split("\n") for block in frames]
        return [
            (lines[0].removeprefix("event: "), json.loads(lines[1][6:])["id"]) for lines in sent
        ]

    assert asyncio.run(scenario()) == [
        ("job.created", "a"),
        ("job.started", "a"),
        ("job.created", "b"),
        ("job.completed", "a"),
    ]


def test_stats_come_from_the_hubs_own_reads_never_a_step_back() -> None:
    """Processes publish stats.updated as they read them: a snapshot read before another but
    published after it made a stream's counters step back. The hub takes one as a sign that
    the counters moved and reads them itself."""
    channel = f"{settings.SCHEDULER_EVENTS_CHANNEL}:stats:{uuid.uuid4().hex}"
    state.enqueue("noop", {}, priority=2)
    counted = current_stats()
    late = {**counted, "pending": counted["pending"] - 1, "total": counted["total"] - 1}

    async def scenario() -> list[dict[str, Any]]:
        # Fresh counters from one process, then an older snapshot from another.
        messages = [{"type": "stats.updated", "data": stats} for stats in (counted, late)]
        hub, client, delivered = await published_to_a_hub(channel, messages)
        await asyncio.wait_for(delivered.wait(), 5)
        await asyncio.sleep(2 * settings.SCHEDULER_STATS_INTERVAL)  # the read after both
        sent = client.take().split(b"\n\n")[:-1]
        hub.leave(client)
        return [json.loads(block.split(b"\ndata: ")[1]) for block in sent]

    received = asyncio.run(scenario())
    assert received and all(stats == counted for stats in received), received


def test_a_slow_client_is_dropped_and_told_while_others_keep_up() -> None:
    """The hub itself, in this process, on a real Redis channel of its own."""
    channel = f"{settings.SCHEDULER_EVENTS_CHANNEL}:slow:{uuid.uuid4().hex}"

    async def scenario() -> tuple[list[bytes], bytes, dict[str, Any]]:
        hub = EventHub(settings.REDIS_URL, channel, queue_size=10, keepalive_seconds=60)
        delivered: dict[Client, asyncio.Event] = {}

        def deliver(client: Client) -> None:
            delivered[client].set()

        async def next_chunk(client: Client) -> bytes:
            """What the stream of `client` would send next (`jobs.live.handler.EventWriter`)."""
            if not client.frames and not client.closed:
                await asyncio.wait_for(delivered[client].wait(), 5)
            delivered[client].clear()
            return client.take()

        slow, fast = hub.join(deliver), hub.join(deliver)
        delivered.update({slow: asyncio.Event(), fast: asyncio.Event()})
        await hub.wait_settled(5)
        publisher = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        received: list[bytes] = []
        for n in range(30):
            await publisher.publish(channel, json.dumps({"type": "job.created", "data": {"n": n}}))
            while len(received) <= n:
                received += (await next_chunk(fast)).split(b"\n\n")[:-1]
        await publisher.aclose()
        farewell = await next_chunk(slow)
        assert slow.closed
        counts = hub.counts()
        hub.leave(fast)
        await asyncio.sleep(0.2)
        return received, farewell, {**counts, "after": hub.counts()}

    received, farewell, counts = asyncio.run(scenario())

    assert [json.loads(f.split(b"data: ")[1])["n"] for f in received] == list(range(30))
    assert farewell == b'event: stream.dropped\ndata: {"reason":"client_too_slow"}\n\n'
    assert counts["clients"] == 1
    assert counts["after"]["clients"] == 0
    assert not counts["after"]["reader_running"] and not counts["after"]["stopping_reader"]


def open_stream(sock: socket.socket, token: str) -> bytes:
    """Ask for the stream on a connected socket; what it sent up to its first stats."""
    sock.sendall(
        f"GET /api/jobs/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    received = b""
    while b"event: stats.updated" not in received:
        received += sock.recv(65536)
    return received


def test_the_production_server_drops_a_client_that_stops_reading_and_ends_streams_on_stop(
    subprocess_env: dict[str, str], token: str, tmp_path: Path
) -> None:
    """uvicorn makes a send wait once the client stops reading (daphne buffers whatever is
    written): the frames queued meanwhile are counted, and past the limit the stream gets
    its farewell and its end once the client reads again. A stream never ends by itself:
    on SIGTERM (a deploy, a restart) the server ends each one cleanly, so an open console
    does not hold the stop for the graceful timeout, here set to two minutes."""
    env = {
        **subprocess_env,
        "SSE_CLIENT_QUEUE_SIZE": "5",
        "GUNICORN_CMD_ARGS": "--graceful-timeout 120",
    }
    server = OneWorkerProductionServer(env, tmp_path / "production.log")
    try:
        with socket.socket() as sock:
            # A small receive buffer: the server's writes back up after a few events.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", server.port))
            dropped = open_stream(sock, token)
            bus = get_event_bus()
            for n in range(200):
                bus.publish("job.created", {"id": f"flood-{n}", "padding": "x" * 16384})
            deadline = time.monotonic() + 10
            while server.get_json("/api/jobs/stream/status", token)[1]["clients"]:
                assert time.monotonic() < deadline, "the client was not dropped"
                time.sleep(0.1)
            # Chunked encoding's last chunk: the response has ended.
            while not dropped.endswith(b"0\r\n\r\n"):
                chunk = sock.recv(65536)
                assert chunk, "the server closed the connection before ending the response"
                dropped += chunk
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            stopped = open_stream(sock, token)
            server.process.send_signal(signal.SIGTERM)
            sock.settimeout(60)
            while chunk := sock.recv(65536):
                stopped += chunk
        assert server.process.wait(timeout=60) == 0, server.log()
    finally:
        server.stop()

    assert b'event: stream.dropped\ndata: {"reason":"client_too_slow"}' in dropped
    assert b'"id":"flood-199"' not in dropped
    # Ended on the stop, not cut off.
    assert stopped.endswith(b"0\r\n\r\n")


# --- Redis goes away and comes back -------------------------------------------------------------


class RedisServer:
    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.dir = tmp_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is needed for this test"
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(self.dir)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


def test_the_stream_reports_redis_loss_and_recovers_with_fresh_stats(
    start_server: Callable[..., Server],
    token: str,
    own_redis: RedisServer,
    settings: Any,
) -> None:
    settings.REDIS_URL = own_redis.url  # this process publishes where the server listens
    server = start_server(REDIS_URL=own_redis.url)
    stream = SseClient(server.port, headers=bearer(token))
    try:
        assert stream.next_event()["event"] == "stats.updated"
        before = state.enqueue("noop", {"phase": "before"}, priority=2)
        assert stream.next_event()["data"] == before

        own_redis.stop()
        lost = stream.events_until(last_is("stream.status"))[-1]
        assert lost["data"] == {"redis": "down"}

        # Jobs are still accepted while Redis is away; only their live events are lost.
        during = state.enqueue("noop", {"phase": "during"}, priority=2)
        assert Job.objects.filter(id=during["id"]).exists()
        # A client that connects now gets the counters and is told at once.
        late = SseClient(server.port, headers=bearer(token))
        try:
            assert late.next_event()["data"] == current_stats()
            assert late.next_event()["data"] == {"redis": "down"}
        finally:
            late.close()

        own_redis.start()
        back = stream.events_until(last_is("stats.updated"), timeout=20)
        assert [e["event"] for e in back[-2:]] == ["stream.status", "stats.updated"]
        assert back[-2]["data"] == {"redis": "up"}
        assert back[-1]["data"] == current_stats()
        assert back[-1]["data"]["pending"] == 2

        # This process's publisher stays quiet for a moment after its failed publish.
        time.sleep(RedisEventBus.RETRY_AFTER_SECONDS)
        after = state.enqueue("noop", {"phase": "after"}, priority=2)
        seen = stream.events_until(last_is("job.created"))
        assert seen[-1]["data"] == after
    finally:
        stream.close()


# --- capacity ---------------------------------------------------------------------------------


def process_status(pid: int) -> dict[str, int]:
    """Threads and resident memory (kB) of a process, from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {"threads": int(fields["Threads"]), "rss_kb": int(fields["VmRSS"].split()[0])}


class RawStream:
    """One stream read with asyncio, so that hundreds fit in one test process."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.received = b""

    @classmethod
    async def open(cls, port: int, token: str) -> RawStream:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"GET /api/jobs/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        await writer.drain()
        stream = cls(reader, writer)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
        assert head.startswith(b"HTTP/1.1 200"), head
        await stream.wait_for(b"event: stats.updated\n")
        return stream

    async def wait_for(self, marker: bytes, timeout: float = 20) -> None:
        async def read() -> None:
            while marker not in self.received:
                chunk = await self.reader.read(65536)
                assert chunk, f"the server closed the stream after {self.received!r}"
                self.received += chunk

        await asyncio.wait_for(read(), timeout)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


# What a first burst of 500 streams may leave in the serving process once they have closed
# (ARCHITECTURE.md, "Memory of open streams"): issue #8's 5 MB under the production server,
# and under daphne, the development server, 9.4 MB. Both measured as users run them, their
# modules loaded from bytecode files: 4.20-4.22 MB and 8.01-8.08 MB (9 runs). Loaded from
# source, as on a machine that writes no bytecode (the suite did, until session 31), the
# compiler's freed memory took part of a burst: 3.66-3.78 MB and 6.66-6.88 MB, against a
# daphne limit of 8 MB that the first run with bytecode files then missed by 24 KB.
FIRST_BURST_KB = {"daphne": 9_400, "production": 5_000}
# Whether six more bursts are measured for memory that accumulates: under the production
# server, which serves users' streams. Daphne, the development server, runs the same stream
# code; what it alone would add is its own, and its six bursts took 25 s of the suite.
LATER_BURSTS_MEASURED = {"daphne": False, "production": True}


@pytest.mark.parametrize("served_by", ["daphne", "production"])
def test_500_streams_hold_no_database_connection_nor_thread_and_others_are_served(
    served_by: str, subprocess_env: dict[str, str], token: str, tmp_path: Path
) -> None:
    """With a pool of 2 connections, 500 open streams leave the API and /health answering,
    and the server's threads and connections do not grow: a stream that kept either would
    show in the counts, or starve the other clients."""
    name = f"sse-capacity-{uuid.uuid4().hex[:8]}"
    env = {
        **subprocess_env,
        "DATABASE_URL": named(subprocess_env["DATABASE_URL"], name),
        "DATABASE_POOL_MIN_SIZE": "1",
        "DATABASE_POOL_MAX_SIZE": "2",
        "DATABASE_POOL_TIMEOUT": "3",
    }
    server_class = Server if served_by == "daphne" else OneWorkerProductionServer
    server = server_class(env, tmp_path / f"{served_by}.log")
    try:
        stream_capacity(
            server, name, token, FIRST_BURST_KB[served_by], LATER_BURSTS_MEASURED[served_by]
        )
    finally:
        server.stop()


def stream_capacity(
    server: Server | OneWorkerProductionServer,
    name: str,
    token: str,
    first_burst_kb: int,
    later_bursts_measured: bool,
) -> None:
    pid = server.serving_pid
    loop = asyncio.new_event_loop()

    def hub_clients() -> int:
        status, counts = server.get_json("/api/jobs/stream/status", token)
        assert status == 200
        return int(counts["clients"])

    def wait_until_no_client() -> None:
        deadline = time.monotonic() + 10
        while hub_clients():
            assert time.monotonic() < deadline, "the server still counts clients"
            time.sleep(0.1)

    def others_are_served() -> None:
        started = time.monotonic()
        assert server.get_json("/api/v1/health", token)[0] == 200
        assert server.get_json("/api/v1/jobs/stats", token)[0] == 200
        assert time.monotonic() - started < 3

    async def one_stream() -> list[RawStream]:
        return [await RawStream.open(server.port, token)]

    def open_500() -> list[RawStream]:
        # At most 50 connects in flight: daphne's listen backlog is 50.
        gate = asyncio.Semaphore(50)

        async def one() -> RawStream:
            async with gate:
                return await RawStream.open(server.port, token)

        async def many() -> list[RawStream]:
            return list(await asyncio.gather(*(one() for _ in range(500))))

        return loop.run_until_complete(many())

    def close_all(streams: list[RawStream]) -> None:
        async def close() -> None:
            await asyncio.gather(*(stream.close() for stream in streams))

        loop.run_until_complete(close())
        wait_until_no_client()
        # A burst opened while the server still holds the last one's closed connections
        # would have both in memory: under daphne that raised the level of a random later
        # burst by 1-2 MB (its allocator "settling"), more often on a loaded machine.
        time.sleep(server.seconds_to_forget_closed)

    def everyone_sees_a_new_job(streams: list[RawStream]) -> None:
        created = state.enqueue("noop", {"to": "all"}, priority=2)
        marker = f'"id":"{created["id"]}"'.encode()

        async def wait() -> None:
            await asyncio.gather(*(stream.wait_for(marker) for stream in streams))

        loop.run_until_complete(wait())

    try:
        # The baseline is the server before any burst, after ordinary use: a request and
        # one stream, opened and closed.
        others_are_served()
        close_all(loop.run_until_complete(one_stream()))
        baseline = process_status(pid)

        streams = open_500()
        try:
            clients = hub_clients()
            while_open = process_status(pid)
            database_connections = server_connections(name)
            others_are_served()
            everyone_sees_a_new_job(streams)
        finally:
            close_all(streams)
        after = process_status(pid)

        assert clients == 500
        assert database_connections <= 2
        # Short requests (the status and health calls above) each run on a thread of their
        # own for a moment: a few come and go, 500 held ones would show.
        assert while_open["threads"] <= baseline["threads"] + 4, (baseline, while_open)
        # Python keeps the memory a burst freed for reuse (pymalloc does not give back an
        # arena any live object still occupies), so after the first burst the process stays
        # near that burst's high-water mark: what 500 open streams held, most of it the
        # server's per-connection state.
        assert after["rss_kb"] - baseline["rss_kb"] <= first_burst_kb, (baseline, after)
        if not later_bursts_measured:
            return

        # Later bursts reuse what the first one freed: nothing accumulates. Accumulation is
        # measured over the two bursts after four: a leak of even 1 kB per stream would add
        # 1 MB there. A burst may also give back an arena that the next one takes again, so
        # the level after them is compared with the highest before. (The "settling" steps of
        # 1-2 MB once seen under daphne at a random burst were a burst opened before daphne
        # had forgotten the last one's connections: `close_all` waits for that.)
        for _ in range(4):
            close_all(open_500())
        settled = process_status(pid)
        for _ in range(2):
            close_all(open_500())
        again = process_status(pid)
        highest = max(after["rss_kb"], settled["rss_kb"])
        assert again["rss_kb"] - highest <= 1024, (after, settled, again)
    finally:
        loop.close()


# --- HEAD ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("production", [False, True], ids=["daphne", "production"])
def test_head_answers_the_streams_headers_and_ends_there(
    start_server: Callable[..., Server],
    subprocess_env: dict[str, str],
    tmp_path: Path,
    token: str,
    production: bool,
) -> None:
    """HEAD is allowed wherever GET is (RFC 9110): the headers of GET's answer, after the same
    checks, and no stream behind them (it would never end). The connection takes its next
    request at once, and the hub has no client for it. Both streams' paths, on one server."""
    server: Server | OneWorkerProductionServer = (
        OneWorkerProductionServer(subprocess_env, tmp_path / "production.log")
        if production
        else start_server()
    )
    try:
        for path in ("/api/jobs/stream", "/api/v1/jobs/stream"):
            # The last path's stream, closed by the client, leaves the hub in a moment.
            wait_for(
                lambda: server.get_json("/api/jobs/stream/status", token)[1]["clients"] == 0,
                what="no client in the hub",
            )
            head_answers_the_streams_headers(server, token, path)
    finally:
        if production:
            server.stop()


def head_answers_the_streams_headers(
    server: Server | OneWorkerProductionServer, token: str, path: str
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    stream: SseClient | None = None
    try:
        stream = SseClient(server.port, path, bearer(token))
        assert stream.next_event()["event"] == "stats.updated"
        conn.request("HEAD", path, headers=bearer(token))
        head = conn.getresponse()
        assert (head.status, head.read()) == (200, b"")
        assert head.getheader("X-Request-ID")
        # Each answer's own, and how a body that HEAD's answer does not have is framed.
        differ = {"date", "x-request-id", "transfer-encoding"}
        assert {
            (name.lower(), value) for name, value in head.getheaders() if name.lower() not in differ
        } == {
            (name.lower(), value)
            for name, value in stream.response.getheaders()
            if name.lower() not in differ
        }

        conn.request("GET", "/api/jobs/stream/status", headers=bearer(token))
        status = conn.getresponse()
        assert (status.status, json.loads(status.read())["clients"]) == (200, 1)

        conn.request("HEAD", path)
        refused = conn.getresponse()
        assert (refused.status, refused.read()) == (401, b"")
        assert refused.getheader("WWW-Authenticate") == "Bearer"

        conn.request("POST", path, headers=bearer(token))
        written = conn.getresponse()
        assert json.loads(written.read())["error"]["code"] == "method_not_allowed"
        assert (written.status, written.getheader("Allow")) == (405, "GET, HEAD")
    finally:
        if stream is not None:
            stream.close()
        conn.close()
