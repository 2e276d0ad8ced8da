"""The handler registry: job type name -> callable, payload schema and timeout.

Users add job types from any installed app's `handlers.py`:

    from worker.registry import handler

    @handler("resize_image", schema={"type": "object", "required": ["url"], ...}, timeout=60)
    def resize_image(job):
        ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

HandlerFunc = Callable[..., Any]


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
            path = ["payload", *(str(part) for part in error.path)]
            message = error.message
            if error.validator == "required":
                missing = error.message.split("'")[1]
                path.append(missing)
                message = "This field is required."
            elif error.validator == "additionalProperties":
                message = f"Unknown field(s): {error.message.split('(')[0].strip()}"
            errors.setdefault(".".join(path), []).append(message)
        return errors


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

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


registry = HandlerRegistry()
handler = registry.register
