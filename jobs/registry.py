"""The handler registry: job type name -> callable, payload schema and timeout, and the
`JobContext` a handler receives.

The core owns it because creating a job validates its payload against the type's schema
(API, console, admin), while only the worker runs the callables. Users add job types from
any installed app's `handlers.py`, which `jobs.apps` discovers at start-up:

    from jobs.registry import handler

    @handler("resize_image", schema={"type": "object", "required": ["url"], ...}, timeout=60)
    def resize_image(job: JobContext):
        ...
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

HandlerFunc = Callable[..., Any]

logger = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised by `raise_if_cancelled()` once the job was cancelled while running."""


@dataclass
class JobContext:
    """What a handler receives: its job's payload, a logger into `job_logs`, a cancel flag."""

    id: uuid.UUID
    type: str
    payload: dict[str, Any]
    attempt_id: uuid.UUID
    attempt_number: int
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    cancel_event: threading.Event = field(default_factory=threading.Event)

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def raise_if_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise JobCancelled(f"job {self.id} was cancelled")


class UnknownJobType(LookupError):
    pass


@dataclass(frozen=True)
class HandlerSpec:
    name: str
    func: HandlerFunc
    schema: dict[str, Any]
    timeout: float | None = None
    description: str = ""
    # Trivially fast and never blocking: run on the worker's loop thread, without a hand-off
    # to a handler thread (and without a timeout, which only a separate thread can enforce).
    inline: bool = False
    validator: Draft202012Validator = field(repr=False, compare=False, default=None)

    def payload_errors(self, payload: Any) -> dict[str, list[str]]:
        """Field path ("payload.to") -> messages; empty when the payload fits the schema."""
        errors: dict[str, list[str]] = {}
        for error in sorted(self.validator.iter_errors(payload), key=lambda e: list(e.path)):
            for path, message in _describe(error):
                messages = errors.setdefault(".".join(["payload", *path]), [])
                if message not in messages:
                    messages.append(message)
        return errors


def _describe(error: ValidationError) -> Iterable[tuple[list[str], str]]:
    """(path under the payload, message) for one schema violation, read from the error's
    keyword and the schema it broke, never from jsonschema's English message."""
    path = [str(part) for part in error.path]
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        # One error per missing name, each carrying the whole `required` list.
        for name in error.validator_value:
            if name not in instance:
                yield [*path, str(name)], "This field is required."
    elif error.validator == "additionalProperties" and isinstance(instance, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        unknown = [
            str(name)
            for name in instance
            if name not in known and not any(re.search(p, str(name)) for p in patterns)
        ]
        yield path, f"Unknown field(s): {', '.join(unknown)}."
    else:
        yield path, error.message


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, HandlerSpec] = {}

    def register(
        self,
        name: str,
        *,
        schema: dict[str, Any] | None = None,
        timeout: float | None = None,
        description: str = "",
        inline: bool = False,
    ) -> Callable[[HandlerFunc], HandlerFunc]:
        payload_schema = schema or {"type": "object"}
        Draft202012Validator.check_schema(payload_schema)

        def decorate(func: HandlerFunc) -> HandlerFunc:
            if name in self._handlers and self._handlers[name].func is not func:
                raise ValueError(f"job type {name!r} is already registered")
            self._handlers[name] = HandlerSpec(
                name=name,
                func=func,
                schema=payload_schema,
                timeout=timeout,
                description=description or (func.__doc__ or "").strip().split("\n")[0],
                inline=inline,
                validator=Draft202012Validator(payload_schema),
            )
            return func

        return decorate

    def unregister(self, name: str) -> None:
        self._handlers.pop(name, None)

    def get(self, name: str) -> HandlerSpec:
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownJobType(name) from None

    def load(self, name: str) -> HandlerSpec:
        """`get`, first importing the module a dotted name lives in when the name is not
        registered yet: a Django task's job type is its module path, and importing the
        module declares the task, which registers it (`jobs.tasks_backend`). For names read
        from stored jobs (the worker), never for names a client sent."""
        if name not in self._handlers and "." in name:
            try:
                import_module(name.rpartition(".")[0])
            except Exception:
                logger.exception("importing the module of job type %r failed", name)
        return self.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


registry = HandlerRegistry()
handler = registry.register
