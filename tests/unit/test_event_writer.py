"""A stream's sends run in the hub's call, and only one that must wait gets a task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobs.live.handler import EventWriter, run_now
from jobs.live.hub import Client


def test_a_coroutine_that_never_waits_runs_to_its_end_in_the_caller() -> None:
    done: list[str] = []

    async def send() -> None:
        done.append("sent")

    async def scenario() -> asyncio.Task[None] | None:
        return run_now(send())

    assert asyncio.run(scenario()) is None
    assert done == ["sent"]


def test_a_coroutine_that_waits_is_finished_by_a_task_with_what_it_awaited() -> None:
    async def scenario() -> list[Any]:
        seen: list[Any] = []
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        failing: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def send() -> None:
            seen.append(await ready)
            await asyncio.sleep(0)
            try:
                await failing
            except ValueError as exc:
                seen.append(exc.args[0])

        task = run_now(send())
        assert task is not None
        await asyncio.sleep(0.01)
        seen.append(task.done())
        ready.set_result("ready")
        await asyncio.sleep(0.01)
        failing.set_exception(ValueError("failed"))
        await task
        return seen

    assert asyncio.run(scenario()) == [False, "ready", "failed"]


def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    async def scenario() -> list[str]:
        seen: list[str] = []
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def send() -> None:
            try:
                await never
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        task = run_now(send())
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    assert asyncio.run(scenario()) == ["cancelled"]


class Connection:
    """An ASGI `send` that waits, like a server's, while its client is not reading."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.reading = asyncio.Event()
        self.reading.set()
        self.error: Exception | None = None

    async def send(self, message: dict[str, Any]) -> None:
        await self.reading.wait()
        if self.error is not None:
            raise self.error
        self.messages.append(message)


def chunks(connection: Connection) -> list[tuple[bytes, bool]]:
    return [(m["body"], m["more_body"]) for m in connection.messages]


def test_frames_queued_while_a_send_waits_go_out_together_and_a_closed_client_ends() -> None:
    async def scenario() -> tuple[list[tuple[bytes, bool]], list[tuple[bytes, bool]]]:
        connection = Connection()
        writer = EventWriter(connection.send, asyncio.current_task())
        client = Client(writer.deliver)
        client.frames.append(b"a")
        writer.deliver(client)  # not started: the first frames are not out yet
        assert connection.messages == []
        writer.start(client)
        connection.reading.clear()
        client.frames.append(b"b")
        writer.deliver(client)
        client.frames.append(b"c")
        writer.deliver(client)
        client.frames.append(b"d")
        writer.deliver(client)
        waiting = chunks(connection)
        connection.reading.set()
        await asyncio.sleep(0.01)
        client.frames.append(b"bye")
        client.closed = True
        writer.deliver(client)
        client.frames.append(b"after the end")
        writer.deliver(client)
        return waiting, chunks(connection)

    waiting, sent = asyncio.run(scenario())

    assert waiting == [(b"a", True)]
    assert sent == [(b"a", True), (b"b", True), (b"cd", True), (b"bye", False)]


def test_a_failed_send_stops_the_writer_and_cancels_the_stream_with_its_error() -> None:
    async def scenario() -> tuple[bool, BaseException | None, list[tuple[bytes, bool]]]:
        connection = Connection()

        async def stream() -> None:
            await asyncio.sleep(10)

        task = asyncio.create_task(stream())
        writer = EventWriter(connection.send, task)
        client = Client(writer.deliver)
        writer.start(client)
        connection.error = OSError("gone")
        client.frames.append(b"lost")
        writer.deliver(client)
        connection.error = None
        client.frames.append(b"never sent")
        writer.deliver(client)
        with pytest.raises(asyncio.CancelledError):
            await task
        return writer.ended, writer.error, chunks(connection)

    ended, error, sent = asyncio.run(scenario())

    assert ended
    assert isinstance(error, OSError)
    assert sent == []
