"""The documented limits of `jobs.limits`, and the schema's spelling of them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobs import limits


def test_the_year_pattern_of_the_schema_matches_exactly_the_years_in_range():
    pattern = re.compile(f"^{limits.WRITTEN_YEAR_PATTERN}$")
    for year in range(1, 10_000):
        written = f"{year:04d}"
        in_range = limits.written_year_in_range(datetime(year, 6, 1))
        assert bool(pattern.match(written)) is in_range, written


def test_the_range_in_milliseconds_is_the_years_in_utc():
    last = limits.EPOCH + timedelta(milliseconds=limits.MAX_MILLISECONDS)
    assert last == datetime(limits.LATEST_YEAR, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)


def test_any_instant_in_range_with_any_offset_leaves_room_for_its_deadline():
    latest = datetime(limits.LATEST_YEAR, 12, 31, 23, 59, 59, 999_999)
    for hours in (-23, 0, 23):
        written = latest.replace(tzinfo=timezone(timedelta(hours=hours)))
        assert limits.written_year_in_range(written)
        assert written + timedelta(days=30) < datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ({"a": [1, "x"]}, []),
        ({"a": "x\x00"}, ["payload.a holds the NUL character"]),
        ({"k\x00": 1}, ["payload.k\\u0000 (key) holds the NUL character"]),
        ({"a": ["\ud800"]}, ["payload.a[0] holds a lone UTF-16 surrogate"]),
        ({"a": {"b": {}}}, ["payload.a.b nests more than 2 arrays and objects"]),
        ({"a": (1, "x\x00")}, ["payload.a[1] holds the NUL character"]),
        ({"a": float("nan"), "b": [float("-inf")]}, ["payload.a is nan,", "payload.b[0] is -inf,"]),
        ({"at": datetime(2026, 1, 1)}, ["payload.at is a Python datetime, which JSON has no"]),
        ({"ids": {1, 2}}, ["payload.ids is a Python set"]),
        ({(1, 2): "x"}, ["payload.(1, 2) (key) is a Python tuple"]),
        ({1: "x", None: [True, 2.5]}, []),
        ({"n": 10**4300, "m": -(10**4300 - 1)}, ["payload.n is an integer of more than 4,300"]),
        (
            {"a": ["x", "\ud800\x00"], "b\x00": "\x00"},
            [
                "payload.a[1] holds a lone UTF-16 surrogate",
                "payload.a[1] holds the NUL character",
                "payload.b\\u0000 holds the NUL character",
                "payload.b\\u0000 (key) holds the NUL character",
            ],
        ),
    ],
)
def test_json_errors_name_the_path_of_each_problem(value, found):
    errors = limits.json_errors(value, name="payload", max_depth=2)
    assert len(errors) == len(found)
    for message, start in zip(errors, found, strict=True):
        assert message.startswith(start)


def test_json_walk_does_not_recurse_on_deep_values():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    (message,) = limits.json_errors(deep, name="payload")
    assert "nests more than 32" in message


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("a\x00b", "a\\u0000b"),
        ("lone \ud800 and \udfff", "lone \\ud800 and \\udfff"),
        ("both \x00\udc80", "both \\u0000\\udc80"),
        ("a pair \U0001f600 stays", "a pair \U0001f600 stays"),
    ],
)
def test_storable_text_escapes_what_postgresql_text_cannot_hold(text, stored):
    assert limits.storable_text(text) == stored
    limits.storable_text(text).encode()  # whole Unicode: it encodes


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"a": [1, 2.5, None, True]}, len('{"a":[1,2.5,null,true]}')),
        ("é€😀", len('"é€😀"'.encode())),
        ({1: "x", None: False}, len('{"1":"x","null":false}')),
        # Past 64 bits, which orjson does not write: measured by Python's encoder.
        ({"n": 10**30}, len('{"n":' + "1" + "0" * 30 + "}")),
        ([10**4299], 4302),
    ],
)
def test_json_size_is_the_bytes_of_compact_json_in_utf8(value, size):
    assert limits.json_size(value) == size


@pytest.mark.parametrize(
    ("text", "keep_end", "kept"),
    [
        ("abcdef", False, "abcdef"),
        ("abcdefghij", False, "abcdefgh… (2 characters cut)"),
        ("abcdefghij", True, "(2 characters cut) …cdefghij"),
        ("x" * 1_000_008, False, "xxxxxxxx… (1,000,000 characters cut)"),
    ],
)
def test_cut_text_keeps_one_end_and_says_how_much_was_cut(text, keep_end, kept):
    assert limits.cut_text(text, 8, keep_end=keep_end) == kept
