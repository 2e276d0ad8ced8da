"""Payload validation against a job type's schema: field paths and messages."""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from jobs.registry import HandlerRegistry, HandlerSpec, JobContext
from tests.handlers_app.handlers import MailArgs, ReportArgs, ResizeArgs, Size

LOGGER = logging.getLogger(__name__)

SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "subject": {"type": "string"},
        "meta": {"type": "object", "properties": {"id": {"type": "integer"}}},
    },
    "patternProperties": {"^x-": {"type": "string"}},
    "required": ["to", "subject"],
    "additionalProperties": False,
}


def spec() -> HandlerSpec:
    registry = HandlerRegistry()
    registry.register("mail", schema=SCHEMA)(lambda job: None)
    return registry.get("mail")


def test_each_missing_field_is_named_once() -> None:
    assert spec().payload_errors({}) == {
        "payload.to": ["This field is required."],
        "payload.subject": ["This field is required."],
    }


def test_unknown_fields_are_listed_by_name_and_patterns_are_known() -> None:
    errors = spec().payload_errors({"to": "a@b", "subject": "s", "cc": "c", "bcc": 1, "x-id": "1"})
    assert errors == {"payload": ["Unknown field(s): cc, bcc."]}


def test_other_violations_keep_the_schema_message_at_their_path() -> None:
    errors = spec().payload_errors({"to": "a@b", "subject": "s", "meta": {"id": "seven"}})
    assert errors == {"payload.meta.id": ["'seven' is not of type 'integer'"]}


# --- payloads declared as types ------------------------------------------------------------


def typed_spec(name: str, payload_type: Any) -> HandlerSpec:
    registry = HandlerRegistry()
    registry.register(name, schema=payload_type)(lambda job: job.payload)
    return registry.get(name)


def test_a_dataclass_gives_its_schema_with_nested_types_written_in_place() -> None:
    schema = typed_spec("resize", ResizeArgs).schema
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert schema["required"] == ["url", "size"]
    assert schema["properties"]["size"]["required"] == ["width"]
    assert schema["properties"]["format"]["enum"] == ["png", "jpeg"]


def test_a_typed_dict_and_a_pydantic_model_give_theirs() -> None:
    mail = typed_spec("mail", MailArgs).schema
    assert (mail["required"], mail["properties"]["cc"]["type"]) == (["to"], "array")
    report = typed_spec("report", ReportArgs).schema
    assert report["additionalProperties"] is False
    assert report["properties"]["rows"] | {"title": None} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 1000,
        "title": None,
    }


def test_typed_payload_errors_have_the_same_paths_and_words() -> None:
    assert typed_spec("resize", ResizeArgs).payload_errors({"url": 1, "size": {}}) == {
        "payload.size.width": ["This field is required."],
        "payload.url": ["1 is not of type 'string'"],
    }
    report = typed_spec("report", ReportArgs)
    assert report.payload_errors({"name": "q1", "rows": 5, "x": 1, "y": 2}) == {
        "payload": ["Unknown field(s): x, y."]
    }
    # A rule only the model states (a validator) is checked too, in pydantic's words.
    assert report.payload_errors({"name": "q 1", "rows": 5}) == {
        "payload.name": ["Value error, no spaces in a report name"]
    }
    assert report.payload_errors({"name": "q1", "rows": 5}) == {}


def test_the_handler_gets_an_instance_of_the_declared_type() -> None:
    context = JobContext(
        uuid.uuid4(), "resize", {"url": "u", "size": {"width": 3}}, uuid.uuid4(), 1, LOGGER
    )
    assert typed_spec("resize", ResizeArgs).run(context) == ResizeArgs("u", Size(3))
    context.payload = {"name": "q1", "rows": 2}
    assert typed_spec("report", ReportArgs).run(context) == ReportArgs(name="q1", rows=2)
    context.payload = {"to": "a@b"}
    assert typed_spec("mail", MailArgs).run(context) == {"to": "a@b"}
    # A plain JSON schema's handler still gets the JSON object.
    assert spec().run(context) is None and context.payload == {"to": "a@b"}


@dataclass
class Tree:
    label: str
    children: list[Tree]


def test_a_type_that_contains_itself_or_is_no_object_is_refused() -> None:
    with pytest.raises(ValueError, match="recursive"):
        typed_spec("tree", Tree)
    with pytest.raises(ValueError, match="not a JSON object"):
        typed_spec("number", int)


def test_a_type_without_a_schema_takes_any_object_and_only_objects() -> None:
    registry = HandlerRegistry()
    registry.register("free")(lambda job: None)
    free = registry.get("free")
    assert free.schema == {"type": "object"}
    assert free.payload_errors({}) == {}
    assert free.payload_errors({"anything": [1, {"nested": None}]}) == {}
    assert free.payload_errors([1]) == {"payload": ["[1] is not of type 'object'"]}


def test_a_declared_type_that_takes_any_object_still_runs_its_validators() -> None:
    def no_spaces(value: dict[str, Any]) -> dict[str, Any]:
        if any(" " in key for key in value):
            raise ValueError("no spaces in a key")
        return value

    checked = typed_spec("checked", Annotated[dict[str, Any], AfterValidator(no_spaces)])
    assert checked.schema == {"type": "object", "additionalProperties": True}
    assert checked.payload_errors({"a b": 1}) == {"payload": ["Value error, no spaces in a key"]}
    assert checked.payload_errors({"ab": 1}) == {}


def test_a_check_judges_its_field_once_the_payload_fits_the_schema() -> None:
    checked: list[Any] = []

    def no_example(to: str) -> None:
        checked.append(to)
        if to.endswith("@example.com"):
            raise ValueError("example.com receives no mail.")

    registry = HandlerRegistry()
    registry.register("mail", schema=SCHEMA, checks={"to": no_example})(lambda job: None)
    mail = registry.get("mail")
    assert mail.payload_errors({"to": "a@example.com", "subject": "s"}) == {
        "payload.to": ["example.com receives no mail."]
    }
    assert mail.payload_errors({"to": "a@b", "subject": "s"}) == {}
    # A payload the schema refuses is refused in its words alone, its fields unchecked.
    assert mail.payload_errors({"to": 1, "subject": "s"}) == {
        "payload.to": ["1 is not of type 'string'"]
    }
    assert checked == ["a@example.com", "a@b"]


def test_a_value_json_has_no_type_for_is_judged_and_worded_as_before() -> None:
    # A Python caller's datetime: jsonschema-rs cannot read it, jsonschema names it.
    errors = spec().payload_errors({"to": "a@b", "subject": datetime(2026, 1, 1)})
    assert errors == {
        "payload.subject": ["datetime.datetime(2026, 1, 1, 0, 0) is not of type 'string'"]
    }


def test_an_async_handler_is_refused_when_registered_not_failed_at_every_run() -> None:
    # Called on a handler thread it would only make a coroutine: nothing run, every attempt
    # failing on a result JSON cannot hold.
    registry = HandlerRegistry()

    async def send(job: JobContext) -> None:
        return None

    async def stream(job: JobContext) -> Any:
        yield 1

    for func in (send, stream):
        with pytest.raises(TypeError, match=f"job type 'mail': {func.__name__} is async"):
            registry.register("mail")(func)
        assert "mail" not in registry


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("", {}, "A job type's name is a string of 1 to 100 characters."),
        ("x" * 101, {}, "A job type's name is a string of 1 to 100 characters."),
        (7, {}, "A job type's name is a string of 1 to 100 characters."),
        ("line\nbreak", {}, "A job type's name holds no control character."),
        ("mail", {"timeout": "30"}, "timeout is a number of seconds above 0, got '30'"),
        ("mail", {"timeout": 0}, "timeout is a number of seconds above 0, got 0"),
        ("mail", {"timeout": float("nan")}, "timeout is a number of seconds above 0, got nan"),
        ("mail", {"timeout": True}, "timeout is a number of seconds above 0, got True"),
    ],
)
def test_a_name_or_timeout_no_job_could_have_is_refused_when_registered(
    name: Any, options: dict[str, Any], message: str
) -> None:
    # Taken, a long name failed every enqueue in the database, and a timeout of "30" ended
    # the handler thread of every job of the type, leaving them running for good.
    registry = HandlerRegistry()
    with pytest.raises(ValueError, match=re.escape(message)):
        registry.register(name, **options)(lambda job: None)
    assert registry.names() == []
    registry.register("mail", timeout=2.5)(lambda job: None)
    assert registry.get("mail").timeout == 2.5
