"""The handler registry: job type name -> callable, payload schema and timeout, and the
`JobContext` a handler receives.

The core owns it because creating a job validates its payload against the type's schema
(API, console, admin), while only the worker runs the callables. Users add job types from
any installed app's `handlers.py`, which `jobs.apps` discovers at start-up:

    from jobs.registry import handler

    @handler("resize_image", schema={"type": "object", "required": ["url"], ...}, timeout=60,
             queue="images")
    def resize_image(job: JobContext):
        ...

A schema may also be declared as a type (a dataclass, a TypedDict or a pydantic model):
its JSON schema is derived with pydantic, payloads are checked against that schema, then
by pydantic, and the handler's `job.payload` is an instance of the type. pydantic is
imported with the first such type (`derive_schema`): 0.08 s of every process's start
(each worker, each `manage.py` command) that declares none.

What no JSON Schema can state of a field, and a type would load pydantic for, a JSON schema
states with `checks`: field name -> a callable given the field's value once the payload fits
the schema; a ValueError it raises refuses the payload, its message under the field's path
(`http_request`'s URL, whose host only IDNA can judge: `checks={"url": outbound.sendable_url}`).

Two implementations of one JSON Schema: jsonschema-rs answers first, and a payload it finds
fitting is taken (0.3 us for a typical payload, where jsonschema took 30 us: 80 us of an
enqueue's CPU between its round trips); any other is judged by jsonschema and worded from
its errors, as before (`_describe` reads their keywords). A payload jsonschema-rs cannot read
(a Python value JSON has no type for, a key that is not a string), or a schema it cannot
build, is left to jsonschema.
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic

import jsonschema_rs
from jsonschema import Draft202012Validator, ValidationError
from typing_extensions import TypeVar

from .queue_names import name_errors as queue_name_errors

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic import ValidationError as PayloadTypeError

HandlerFunc = Callable[..., Any]
# Given a dotted job type's name and what it names once its module is imported (`load`),
# registers it when it is of the loader's kind, else leaves it.
Loader = Callable[[str, object], None]
PayloadT = TypeVar("PayloadT", default=dict[str, Any])

logger = logging.getLogger(__name__)


class JobCancelled(Exception):
    """Raised by `raise_if_cancelled()` once the job was cancelled while running."""


class RetryAfter(Exception):
    """Raised by a handler whose attempt failed and whose job should be tried again after
    exactly `seconds` (a remote service's Retry-After, a resource known to be busy until
    then) instead of the backoff. The attempt counts as any failed attempt: with none left,
    the job enters the dead-letter queue."""

    LONGEST = timedelta(days=365)

    def __init__(self, seconds: float, message: str = "") -> None:
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 < seconds <= self.LONGEST.total_seconds()
        ):
            raise ValueError(
                f"RetryAfter takes a number of seconds above 0 and at most "
                f"{self.LONGEST.days} days, not {seconds!r}"
            )
        super().__init__(message or f"retry after {seconds:g} s")
        self.delay = timedelta(seconds=seconds)


@dataclass
class JobContext(Generic[PayloadT]):
    """What a handler receives: its job's payload (an instance of the type its schema was
    declared as, else the JSON object), a logger into `job_logs`, a cancel flag."""

    id: uuid.UUID
    type: str
    payload: PayloadT
    attempt_id: uuid.UUID
    attempt_number: int
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    _cancel_event: threading.Event | None = field(default=None, init=False, repr=False)

    @property
    def cancel_event(self) -> threading.Event:
        """Set once the job is cancelled (or its claim lost, or its timeout passed). Made on
        first use: most handlers never look, and making a `threading.Event` cost the worker's
        loop more than running a no-op handler (a third of its CPU per job in a drain)."""
        if self._cancel_event is None:
            with _CANCEL_EVENTS:
                if self._cancel_event is None:
                    self._cancel_event = threading.Event()
        return self._cancel_event

    @property
    def cancelled(self) -> bool:
        return self._cancel_event is not None and self._cancel_event.is_set()

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise JobCancelled(f"job {self.id} was cancelled")


# Makes each context's cancel event once, whichever thread asks first (the handler's, or the
# loop's to cancel it).
_CANCEL_EVENTS = threading.Lock()


# `jobs.type` is a varchar of this many characters.
TYPE_NAME_MAX_LENGTH = 100
# No control character (also what an OpenAPI schema states of a type's name).
TYPE_NAME_PATTERN = rf"^[^\x00-\x1f\x7f]{{1,{TYPE_NAME_MAX_LENGTH}}}$"
_TYPE_NAME = re.compile(TYPE_NAME_PATTERN)


def type_name_errors(name: object) -> list[str]:
    """Why `name` cannot name a job type; empty when it can."""
    if not isinstance(name, str) or not 1 <= len(name) <= TYPE_NAME_MAX_LENGTH:
        return [f"A job type's name is a string of 1 to {TYPE_NAME_MAX_LENGTH} characters."]
    if not _TYPE_NAME.fullmatch(name):
        return ["A job type's name holds no control character."]
    return []


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
    # The queue its jobs go to when the caller names none (None: `default`).
    queue: str | None = None
    # Created by the project's own code only (`bulk_action`: the console's confirmed bulk
    # actions), never by a client of the API or the console's New job form.
    internal: bool = False
    # The most bytes its payload holds as compact JSON (None: `API_MAX_BODY_BYTES`).
    max_payload_bytes: int | None = None
    validator: Draft202012Validator = field(repr=False, compare=False, default=None)
    # Says quickly that a payload fits the schema (None: it could not be built); see above.
    checker: jsonschema_rs.Draft202012Validator | None = field(
        repr=False, compare=False, default=None
    )
    # The payload's declared type, when the schema was declared as one (`payload_type`).
    adapter: TypeAdapter[Any] | None = field(repr=False, compare=False, default=None)
    # Top-level field -> a check of its value beyond the schema (see the top).
    checks: Mapping[str, Callable[[Any], object]] = field(
        repr=False, compare=False, default_factory=dict
    )

    def payload_errors(self, payload: Any) -> dict[str, list[str]]:
        """Field path ("payload.to") -> messages; empty when the payload fits the schema
        and passes its `checks` (and, for a declared type, when pydantic makes one of it: its
        validators too)."""
        errors: dict[str, list[str]] = {}
        if not self._fits(payload):
            for error in sorted(self.validator.iter_errors(payload), key=lambda e: list(e.path)):
                for path, message in _describe(error):
                    _add(errors, path, message)
        if not errors:
            for name, check in self.checks.items():
                if name in payload:
                    try:
                        check(payload[name])
                    except ValueError as error:
                        _add(errors, [name], str(error))
        if not errors and self.adapter is not None:
            from pydantic import ValidationError as PayloadTypeError  # loaded: see the top

            try:
                self.adapter.validate_python(payload)
            except PayloadTypeError as error:
                for path, message in _describe_typed(error):
                    _add(errors, path, message)
        return errors

    def _fits(self, payload: Any) -> bool:
        if self.checker is None:
            return False
        try:
            return self.checker.is_valid(payload)
        except ValueError:  # a value JSON has no type for, a key that is not a string
            return False

    def run(self, job: JobContext[Any]) -> Any:
        """Call the handler; a declared type's handler gets its payload as that type."""
        if self.adapter is not None:
            job = replace(job, payload=self.adapter.validate_python(job.payload))
        return self.func(job)


def _checker(schema: dict[str, Any]) -> jsonschema_rs.Draft202012Validator | None:
    """jsonschema-rs's validator of `schema`; None when it cannot build one (a `$ref` to
    another document: it would fetch it, jsonschema never does)."""
    try:
        return jsonschema_rs.Draft202012Validator(schema, offline=True)
    except ValueError:
        return None


def _add(errors: dict[str, list[str]], path: Iterable[str], message: str) -> None:
    messages = errors.setdefault(".".join(["payload", *path]), [])
    if message not in messages:
        messages.append(message)


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
    elif error.validator == "pattern" and isinstance(error.schema.get("description"), str):
        # A pattern says what it wants in its description (a noun phrase) better than the
        # regular expression itself does.
        yield path, f"Must be {error.schema['description']}."
    else:
        yield path, error.message


def _describe_typed(error: PayloadTypeError) -> Iterable[tuple[list[str], str]]:
    """The same (path, message) pairs for what pydantic refused: a missing field and
    unknown fields in the words of `_describe`, anything else in pydantic's."""
    unknown: dict[tuple[str, ...], list[str]] = {}
    for detail in error.errors(include_url=False):
        path = [str(part) for part in detail["loc"]]
        if detail["type"] == "missing":
            yield path, "This field is required."
        elif detail["type"] == "extra_forbidden" and path:
            unknown.setdefault(tuple(path[:-1]), []).append(path[-1])
        else:
            yield path, detail["msg"]
    for parent, names in unknown.items():
        yield list(parent), f"Unknown field(s): {', '.join(names)}."


def derive_schema(payload_type: Any) -> tuple[dict[str, Any], TypeAdapter[Any]]:
    """The JSON schema of a payload declared as a type, with its `$defs` written in place:
    the schema is embedded in the OpenAPI document, where `#/$defs/...` would point at the
    document's root. A type that contains itself cannot be written out and is refused."""
    from pydantic import TypeAdapter  # see the top: only for a declared type

    adapter: TypeAdapter[Any] = TypeAdapter(payload_type)
    schema = adapter.json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: Any, within: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [inline(item, within) for item in node]
        if not isinstance(node, dict):
            return node
        reference = node.get("$ref")
        rest = {key: inline(value, within) for key, value in node.items() if key != "$ref"}
        if not isinstance(reference, str) or not reference.startswith("#/$defs/"):
            return rest
        name = reference.removeprefix("#/$defs/")
        if name in within:
            raise ValueError(f"payload type {payload_type!r} is recursive ({name})")
        return {**inline(definitions[name], within | {name}), **rest}

    derived = inline(schema, frozenset())
    if derived.get("type") != "object":
        raise ValueError(f"payload type {payload_type!r} is not a JSON object")
    return derived, adapter


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, HandlerSpec] = {}
        self._loaders: list[Loader] = []

    def register(
        self,
        name: str,
        *,
        schema: dict[str, Any] | type[Any] | None = None,
        timeout: float | None = None,
        description: str = "",
        inline: bool = False,
        queue: str | None = None,
        internal: bool = False,
        checks: Mapping[str, Callable[[Any], object]] | None = None,
        max_payload_bytes: int | None = None,
    ) -> Callable[[HandlerFunc], HandlerFunc]:
        """`schema`: a JSON schema (a dict), or a type to derive it from (`derive_schema`);
        `checks`: what the schema cannot state of its fields (see the top)."""
        adapter = None
        if schema is None or isinstance(schema, dict):
            payload_schema = schema or {"type": "object"}
        else:
            payload_schema, adapter = derive_schema(schema)
        Draft202012Validator.check_schema(payload_schema)
        if wrong := type_name_errors(name):
            raise ValueError(f"job type {name!r}: {wrong[0]}")
        if queue is not None and (wrong := queue_name_errors(queue)):
            raise ValueError(f"job type {name!r}: {wrong[0]}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise ValueError(
                f"job type {name!r}: timeout is a number of seconds above 0, got {timeout!r}"
            )

        def decorate(func: HandlerFunc) -> HandlerFunc:
            if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
                # A handler thread calling it would only make a coroutine: nothing would run,
                # and every attempt would fail on a result JSON cannot hold.
                raise TypeError(
                    f"job type {name!r}: {getattr(func, '__name__', func)} is async; handlers "
                    "are plain functions run on the worker's threads (call a coroutine from "
                    "one with asgiref.sync.async_to_sync)"
                )
            if name in self._handlers and self._handlers[name].func is not func:
                raise ValueError(f"job type {name!r} is already registered")
            self._handlers[name] = HandlerSpec(
                name=name,
                func=func,
                schema=payload_schema,
                timeout=timeout,
                description=description or (func.__doc__ or "").strip().split("\n")[0],
                inline=inline,
                queue=queue,
                internal=internal,
                max_payload_bytes=max_payload_bytes,
                validator=Draft202012Validator(payload_schema),
                checker=_checker(payload_schema),
                adapter=adapter,
                checks=dict(checks or {}),
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

    def add_loader(self, loader: Loader) -> None:
        """Have `load` hand `loader` what the dotted names it imports name: a kind of job
        type that registers itself otherwise than by `@handler` adds one (a Django task:
        `jobs.tasks_backend`), so the registry names none of them."""
        if loader not in self._loaders:
            self._loaders.append(loader)

    def load(self, name: str) -> HandlerSpec:
        """`get`, first importing the module a dotted name lives in when the name is not
        registered yet: a Django task's job type is its module path, and importing the
        module declares the task. Declaring registers only a task declared on an alias of
        the scheduler's backend, so what the name names then goes to the loaders
        (`add_loader`): a task declared elsewhere and enqueued through `using(backend=...)`
        is registered there. For names read from stored jobs (the worker), never for names
        a client sent: a client could have any module imported."""
        if name not in self._handlers and "." in name:
            module, _, attribute = name.rpartition(".")
            try:
                named = getattr(import_module(module), attribute, None)
                for loader in self._loaders:
                    if name not in self._handlers:
                        loader(name, named)
            except Exception:
                logger.exception("loading job type %r from its module failed", name)
        return self.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def submittable(self) -> list[str]:
        """The types a client may create jobs of: all but the internal ones."""
        return sorted(name for name, spec in self._handlers.items() if not spec.internal)

    def unknown_type_message(self, name: str) -> str:
        return f"Unknown job type {name!r}. Registered types: {', '.join(self.submittable())}."

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


registry = HandlerRegistry()
handler = registry.register
