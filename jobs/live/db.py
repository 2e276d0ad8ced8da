"""Database reads of the event stream, which must never keep a connection.

A stream lives for hours; a connection it kept would be one less in the process's pool
for every open stream. Each read borrows a connection and gives it back before returning,
and leaves nothing behind in the caller's context variables: `sync_to_async` copies them
back to the caller, and Django keeps each context's connection object (a few kB) there.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


async def read_and_release(func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    def run() -> R:
        try:
            return func(*args, **kwargs)
        finally:
            for connection in connections.all(initialized_only=True):
                # Inside an atomic block (only a test's transaction wraps a stream) the
                # connection is not ours to give back.
                if not connection.in_atomic_block:
                    connection.close()

    return await asyncio.create_task(sync_to_async(run)(), context=contextvars.copy_context())
