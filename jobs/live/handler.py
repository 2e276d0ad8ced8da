"""The project's ASGI handler: Django's, except for event streams, which are kept lean.

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
  Django keeps in context variables (a cache client and a database connection object per
  context) are freed then, and the stream that follows holds only its events generator.
  Its database reads give their connection back at once (`jobs.live.db`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.core.handlers.asgi import get_script_prefix
from django.http.response import HttpResponseBase
from django.urls import reverse, set_script_prefix

from .views import EventStreamResponse


class ASGIHandler(DjangoASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self.stream_paths = frozenset({reverse("job-stream"), reverse("job-stream-v1")})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in self.stream_paths:
            # Not kept in a variable: the finished task would keep its context alive.
            events = await asyncio.create_task(
                self._answer(scope, receive, send), context=contextvars.Context()
            )
            if events is not None:
                await _stream(events, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def _answer(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        """Django's `handle` up to the response: a whole answer is sent as Django would; for
        a stream only the headers, and its events generator is returned."""
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
        events = None
        if isinstance(response, EventStreamResponse):
            events = response.events
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
        else:
            await self.send_response(response, send)
        # Fires request_finished (the pool gets its connection back) as for any request.
        await sync_to_async(response.close)()
        body_file.close()
        return events


async def _stream(events: AsyncGenerator[bytes, None], receive: Any, send: Any) -> None:
    """Send the events until they end or the client goes away (any message it sends now is
    `http.disconnect`: the request body was read)."""
    task = asyncio.current_task()

    def stop(_: object) -> None:
        if task is not None:
            task.cancel()

    disconnect = asyncio.ensure_future(receive())
    disconnect.add_done_callback(stop)
    try:
        async for chunk in events:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body"})
    except asyncio.CancelledError:
        if task is None or not disconnect.done():
            raise
        task.uncancel()
    except OSError:
        pass  # a server that reports the lost client on send rather than on receive
    finally:
        disconnect.remove_done_callback(stop)
        disconnect.cancel()
        await events.aclose()
