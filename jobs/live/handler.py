"""The project's ASGI handler: Django's, except for event streams, which are kept lean, and
for synchronous requests, which take one thread hop.

An open stream holds, for its whole life, whatever its request left reachable, and a burst
of 500 streams leaves the process's memory at the high-water mark of what they held (freed
Python objects are reused, not given back to the system). So a stream request:

- runs outside a `ThreadSensitiveContext`. Django runs each request in one: its first
  synchronous step (a middleware, the session, the ORM) starts a thread that the request
  keeps until its response is fully sent, for a stream its whole life. Here the few
  synchronous steps (middleware, authentication, one stats read) share the process's one
  thread-sensitive thread, and the stream itself is pure asyncio.
- goes through Django (middleware, session, authentication, the view) in a context of its
  own, in a task that ends once the headers are sent: the request, the response and what
  Django keeps in context variables (a database connection object per context) are freed
  then. Its database reads give their connection back at once (`jobs.live.db`).
- then waits only for the client to leave, while the hub hands it its frames (`_stream`,
  `EventWriter`): no task, generator or future of its own waits for them.

The high-water mark also counts what a burst has alive besides its streams, so finished
requests are freed at once rather than by the cyclic collector, the streams' contexts share
the process's cache clients, and two streams at most go through Django at a time.

The live routes' other async view (the hub's `stream/status`) takes Django's async path, on
the event loop where the process's one hub lives.

Every other request (the API, the console, the admin, static files) is synchronous code from
end to end: the middleware, DRF and the views are all sync. Django's async path would start a
thread for each request and cross between it and the event loop a dozen times (once per
middleware hook, then the view, then the signals). Here the whole request runs in one hop on
a fixed pool of threads, through the same middleware loaded in its sync mode, as Django's
WSGI handler runs it; the event loop only reads the body and writes the answer. The pool has
as many threads as the process has database connections (`DATABASE_POOL_MAX_SIZE`), so a
request never waits for a connection; a busy process queues requests, not connections.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import IO, Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.cache import caches
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.core.handlers.asgi import ASGIRequest, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import FileResponse
from django.http.response import HttpResponseBase, StreamingHttpResponse
from django.urls import reverse, set_script_prefix

from . import urls as live_urls
from .credentials import Credential
from .hub import Client, get_hub
from .views import EventStreamResponse, first_frames


class ASGIHandler(DjangoASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self.stream_paths = frozenset({reverse("job-stream"), reverse("job-stream-v1")})
        self.live_paths = frozenset(reverse(route.name) for route in live_urls.urlpatterns)
        self.sync_handler = BaseHandler()
        self.sync_handler.load_middleware(is_async=False)
        threads = settings.DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size")
        self.executor = ThreadPoolExecutor(max_workers=threads or 10, thread_name_prefix="request")
        # What each stream's Django part starts from: a context already holding the cache
        # clients, so that it reuses them rather than building its own (a client and its
        # connection factory, freed only by the cyclic collector once the context is gone).
        self.stream_context = contextvars.Context()
        self.stream_context.run(caches.all)
        # Streams whose Django part runs at once. Its synchronous steps take turns on one
        # thread whatever the number, but each request started holds its objects until it
        # is answered: 500 clients connecting together would otherwise have hundreds alive,
        # interleaved in memory with the streams that stay open (0.6 MB more kept by the
        # process after such a burst than when they take turns).
        self.stream_setups = asyncio.Semaphore(2)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in self.live_paths:
            await self.handle_in_thread(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] in self.stream_paths:
            async with self.stream_setups:
                # Not kept in a variable: the finished task would keep its context alive.
                credential = await asyncio.create_task(
                    self._answer(scope, receive, send), context=self.stream_context.copy()
                )
            if credential is not None:
                await _stream(receive, send, credential)
        else:
            await super().__call__(scope, receive, send)

    async def _answer(self, scope: dict[str, Any], receive: Any, send: Any) -> Credential | None:
        """Django's `handle` up to the response: a whole answer is sent as Django would; for
        a stream only the headers, and what let it in is returned: the events are to follow
        (for HEAD, none: the answer ends with the headers)."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return None
        set_script_prefix(get_script_prefix(scope))
        await signals.request_started.asend(sender=self.__class__, scope=scope)
        request, refused = self.create_request(scope, body_file)
        # create_request gives a request, or else the answer refusing it.
        response = (
            cast(HttpResponseBase, refused)
            if request is None
            else await self.run_get_response(request)
        )
        credential = response.credential if isinstance(response, EventStreamResponse) else None
        if isinstance(response, EventStreamResponse):
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        *(
                            (name.encode("ascii"), value.encode("latin1"))
                            for name, value in response.items()
                        ),
                        *(
                            (b"Set-Cookie", c.output(header="").encode("ascii").strip())
                            for c in response.cookies.values()
                        ),
                    ],
                }
            )
            if credential is None:
                await send({"type": "http.response.body"})
        else:
            await self.send_response(response, send)
        # Fires request_finished (the pool gets its connection back) as for any request.
        await sync_to_async(response.close)()
        body_file.close()
        if request is not None:
            # The middleware leave reference cycles through the request (the lazy user's
            # closure, the message storage, the CSP nonce): without them it is freed when
            # this task ends, rather than when the cyclic collector next gets to it, by
            # which time a burst of streams has had hundreds of finished requests alive.
            request.__dict__.clear()
        return credential

    async def handle_in_thread(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        loop = asyncio.get_running_loop()
        try:
            response = await loop.run_in_executor(self.executor, self.respond, scope, body_file)
            if not response.streaming:
                await self.send_response(response, send)
                return
            try:
                if isinstance(response, StreamingHttpResponse) and not response.is_async:
                    blocks: Iterator[bytes] = iter(response.streaming_content)  # type: ignore[arg-type]
                    response.streaming_content = self.read_in_threads(blocks)
                await self.send_response(response, send)
            finally:
                await loop.run_in_executor(self.executor, response.close)
        finally:
            body_file.close()

    def create_request(
        self, scope: Mapping[str, Any], body_file: IO[bytes]
    ) -> tuple[ASGIRequest, None] | tuple[None, HttpResponseBase]:
        """Django's request, with the length of a body that came in chunks: sent without
        `Content-Length` (`Transfer-Encoding: chunked`), it was taken for no body at all by
        Django's and DRF's readers (a job POSTed so was refused, "This field is required."
        for each field), and escaped the API's size limit. The whole body is read by now."""
        created = super().create_request(scope, body_file)
        request = created[0]
        if request is not None and "CONTENT_LENGTH" not in request.META:
            size = body_file.seek(0, os.SEEK_END)
            body_file.seek(0)
            if size:
                request.META["CONTENT_LENGTH"] = str(size)
        return created

    def respond(self, scope: dict[str, Any], body_file: IO[bytes]) -> HttpResponseBase:
        """One request, start to end, in the calling thread (what Django's WSGI handler does)."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error = self.create_request(scope, body_file)
        response = cast(
            HttpResponseBase,
            self.sync_handler.get_response(request) if request is not None else error,
        )
        # The sender of request_finished, as Django's own handlers set it.
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        if not response.streaming:
            # request_finished: the database connection goes back to the pool now, not
            # after the client has read the answer.
            response.close()
        return response

    def read_in_threads(self, chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
        """A synchronous body (a static file's blocks) read chunk by chunk on the pool."""

        async def read() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            while (
                chunk := await loop.run_in_executor(self.executor, next, chunks, None)
            ) is not None:
                yield chunk

        return read()


async def _stream(receive: Any, send: Any, credential: Credential) -> None:
    """Send the events until the client goes away, or is dropped, or `credential` no longer
    holds (the hub checks it on each keep-alive beat).

    The stream's task sends the first frames, then only waits for `receive`: the request body
    was read, so its next message is `http.disconnect` (the client is gone, or the response
    has ended). The hub hands each frame to the stream's `EventWriter` as it queues it, so
    an open stream has no task of its own besides its request's, and no coroutine or future
    waiting for frames."""
    stream = asyncio.current_task()
    hub = get_hub()
    writer = EventWriter(send, stream)
    client = hub.join(writer.deliver, credential)
    try:
        await send(
            {"type": "http.response.body", "body": await first_frames(hub), "more_body": True}
        )
        writer.start(client)
        await receive()
    except asyncio.CancelledError:
        # A failed send cancels the wait for the client (`EventWriter.fail`).
        if stream is None or writer.error is None:
            raise
        stream.uncancel()
        if not isinstance(writer.error, OSError):
            raise writer.error from None
    except OSError:
        pass  # a server that reports the lost client on send rather than on receive
    finally:
        writer.ended = True
        hub.leave(client)


class EventWriter:
    """Sends one stream's frames from the hub's `deliver` call, as they are queued.

    An ASGI server's `send` writes to the connection at once unless the client has stopped
    reading, so each send runs in the caller (`run_now`); one that must wait for the client
    gets a task, and the frames queued meanwhile go out together once it is done (the hub
    drops a client that falls too far behind, as it did when the stream's task sent them).
    """

    __slots__ = ("ended", "error", "send", "sending", "started", "stream")

    def __init__(self, send: Any, stream: asyncio.Task[Any] | None) -> None:
        self.send = send
        self.stream = stream
        self.started = False  # set once the first frames are out
        self.ended = False  # set with the last chunk, or when the stream stops
        self.sending: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    def start(self, client: Client) -> None:
        self.started = True
        self.deliver(client)

    def deliver(self, client: Client) -> None:
        while self.started and not self.ended and self.sending is None:
            if not client.frames and not client.closed:
                return
            # A closed client's last frames end the response.
            self.ended = client.closed
            message = {
                "type": "http.response.body",
                "body": client.take(),
                "more_body": not self.ended,
            }
            try:
                self.sending = run_now(self.send(message))
            except Exception as exc:  # reported by the stream's task
                self.fail(exc)
                return
            if self.sending is not None:
                self.sending.add_done_callback(partial(self._sent, client))

    def _sent(self, client: Client, sending: asyncio.Task[None]) -> None:
        self.sending = None
        if not sending.cancelled() and (error := sending.exception()) is not None:
            self.fail(error)
        else:
            self.deliver(client)

    def fail(self, error: BaseException) -> None:
        self.ended = True
        if self.error is None and self.stream is not None:
            self.error = error
            self.stream.cancel()


def run_now(coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Runs `coroutine` in the caller until it returns (None) or must wait for something;
    then a task runs the rest (returned). A task created for every send would cost one per
    stream per frame, for sends that almost never wait. (Python 3.12's eager tasks,
    `asyncio.eager_task_factory`, do this; on 3.11 it is done here.)"""
    try:
        awaited = coroutine.send(None)
    except StopIteration:
        return None
    return asyncio.ensure_future(_resume(coroutine, awaited))


async def _resume(coroutine: Coroutine[Any, Any, None], awaited: Any) -> None:
    """What a task does for a coroutine that `run_now` started: waits for what it awaits,
    then resumes it with the outcome (a result, an error, or this task's cancellation)."""
    while True:
        try:
            if awaited is None:  # a bare `yield`, as asyncio.sleep(0) does
                await asyncio.sleep(0)
            else:
                # A future yielded as to a task, which clears the mark before waiting for it.
                awaited._asyncio_future_blocking = False
                await awaited
        except BaseException as exc:  # handed to the coroutine
            step = partial(coroutine.throw, exc)
        else:
            step = partial(coroutine.send, None)
        try:
            awaited = step()
        except StopIteration:
            return
