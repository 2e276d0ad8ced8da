"""The project's ASGI handler: Django's, except that event streams get no thread of their own.

Django runs each request in its own `ThreadSensitiveContext`: the first synchronous step of a
request (a middleware, the session, the ORM) starts a thread that the request then keeps
until its response is fully sent. For an SSE stream that is its whole life, so 500 open
streams would be 500 idle threads. Stream requests are therefore handled outside such a
context: their few synchronous steps (middleware, authentication, one stats read) share the
process's one thread-sensitive thread, then the stream itself is pure asyncio. Their
database reads give their connection back at once (`jobs.live.db`).
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.urls import reverse


class ASGIHandler(DjangoASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self.stream_paths = frozenset({reverse("job-stream"), reverse("job-stream-v1")})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in self.stream_paths:
            await self.handle(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)
