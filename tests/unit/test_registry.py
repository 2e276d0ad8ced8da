"""Payload validation against a job type's schema: field paths and messages."""

from __future__ import annotations

from jobs.registry import HandlerRegistry, HandlerSpec

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
