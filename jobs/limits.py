"""The documented limits of what a job may hold, checked before Python or PostgreSQL fails on it.

JSON: a payload (or a handler's result) nests at most `MAX_JSON_DEPTH` arrays and objects
(Python's parser and encoder recurse, so a deeper document would crash them), holds only JSON's
values (no NaN or Infinity, no integer of more than `MAX_INTEGER_DIGITS` digits, no Python
object JSON has no form for), and no key or string holds NUL (PostgreSQL's jsonb cannot store
it) or a lone UTF-16 surrogate such as `\\ud800` (not Unicode: it cannot be encoded, so neither
stored nor shown).

Size: a payload is at most `API_MAX_BODY_BYTES` (what `POST /jobs` takes, from any caller) and
a handler's result at most `SCHEDULER_MAX_RESULT_BYTES`, as compact JSON in UTF-8
(`json_size`), since each is stored, listed and pushed to every console and webhook whole.

Text a job's code makes (error messages, stack traces, log lines) is stored whatever it holds:
`storable_text` writes NUL and lone surrogates as their escapes instead. It is stored in bounded
length: what `cut_text` leaves of a longer one says how many characters were cut.

Time: every instant a request takes is written with a year from `EARLIEST_YEAR` to
`LATEST_YEAR`, in Unix milliseconds from 0 to `MAX_MILLISECONDS`. Whatever its UTC offset, such
an instant, its virtual deadline (an hour later at most), its recurrences and its retries stay
far inside what Python's datetime and the API's time format can represent.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

MAX_JSON_DEPTH = 32
# A job's attempts (`max_retries`): from 1 to this, the jobs table's check constraint too.
MAX_ATTEMPTS = 10

EARLIEST_YEAR = 1970
LATEST_YEAR = 9998
EPOCH = datetime(EARLIEST_YEAR, 1, 1, tzinfo=UTC)
# The last millisecond of LATEST_YEAR in UTC.
MAX_MILLISECONDS = (datetime(LATEST_YEAR + 1, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(
    milliseconds=1
) - 1
OUT_OF_RANGE_MESSAGE = f"Out of range: write a year from {EARLIEST_YEAR} to {LATEST_YEAR}."
# The years EARLIEST_YEAR..LATEST_YEAR as a regular expression, for the OpenAPI schema.
WRITTEN_YEAR_PATTERN = "(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JsonLimitError(ValueError):
    """A JSON text that parses, or a value made in Python, that breaks one of the limits
    above."""


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _walk(value: Any, max_depth: int, nul: bool) -> Iterator[tuple[str, str]]:
    """(path, problem) for each limit `value` breaks, iteratively (never recursing); NUL is
    only looked for when `nul`. A path is kept as its keys and indexes and written out only
    for a problem: writing each key's path as the walk passed it was most of the walk."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            for problem in _string_problems(item, nul):
                yield _written(path), problem
            continue
        if not isinstance(item, dict | list | tuple):
            if wrong := _scalar_problem(item):
                yield _written(path), wrong
            continue
        if depth > max_depth:
            yield _written(path), f"nests more than {max_depth} arrays and objects"
            continue
        if not isinstance(item, dict):
            stack.extend((child, depth + 1, (*path, index)) for index, child in enumerate(item))
            continue
        for key, child in item.items():
            if isinstance(key, str):
                for problem in _string_problems(key, nul):
                    yield _written((*path, key)) + " (key)", problem
            elif not isinstance(key, _JSON_SCALARS):
                yield _written((*path, str(key))) + " (key)", _not_json(key)
                continue
            stack.append((child, depth + 1, (*path, str(key))))


# Python writes an integer of at most this many digits (its default
# `sys.get_int_max_str_digits()`); a longer one fails when it is encoded, not before.
MAX_INTEGER_DIGITS = 4300
_INTEGER_BOUND = 10**MAX_INTEGER_DIGITS

# What JSON has a form for besides strings, arrays and objects (`json.dumps` also writes
# these as an object's keys, as strings).
_JSON_SCALARS = (bool, int, float, type(None))


def _scalar_problem(item: Any) -> str | None:
    if not isinstance(item, _JSON_SCALARS):
        return _not_json(item)
    if isinstance(item, float) and not math.isfinite(item):
        return f"is {item}, which JSON cannot hold"
    if isinstance(item, int) and not -_INTEGER_BOUND < item < _INTEGER_BOUND:
        return f"is an integer of more than {MAX_INTEGER_DIGITS:,} digits"
    return None


def _not_json(item: Any) -> str:
    return f"is a Python {type(item).__name__}, which JSON has no form for"


def _written(path: tuple[str | int, ...]) -> str:
    """`.name[0].key`: keys after a dot, escaped (`printable`), indexes in brackets."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{printable(part)}" for part in path)


_NUL_PROBLEM = "holds the NUL character \\u0000, which cannot be stored"
_SURROGATE_PROBLEM = "holds a lone UTF-16 surrogate (such as \\ud800), which is not Unicode"


def _string_problems(text: str, nul: bool) -> tuple[str, ...]:
    has_nul = nul and "\x00" in text
    if _SURROGATE.search(text):
        return (_NUL_PROBLEM, _SURROGATE_PROBLEM) if has_nul else (_SURROGATE_PROBLEM,)
    return (_NUL_PROBLEM,) if has_nul else ()


def json_errors(
    value: Any, *, name: str, max_depth: int = MAX_JSON_DEPTH, nul: bool = True
) -> list[str]:
    """Messages for the limits the JSON `value` (called `name`) breaks; empty when it fits.
    NUL is only looked for when `nul`."""
    return [
        f"{name}{path} {problem}." for path, problem in sorted(set(_walk(value, max_depth, nul)))
    ]


def json_size(value: Any) -> int:
    """Bytes of `value`, which `json_errors` found fitting, as compact JSON in UTF-8."""
    try:
        return len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
    except orjson.JSONEncodeError:
        # orjson writes no integer beyond 64 bits; JSON, and Python's encoder, do.
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def size_error(value: Any, *, name: str, max_bytes: int, setting: str) -> str | None:
    """The message for `value` (called `name`, which `json_errors` found fitting) when it is
    over `max_bytes` as `json_size` measures it, the limit the setting `setting` holds."""
    size = json_size(value)
    if size <= max_bytes:
        return None
    return f"{name} is {size:,} bytes as JSON, over {setting} ({max_bytes:,})."


def cut_text(text: str, limit: int, *, keep_end: bool = False) -> str:
    """`text` when it holds at most `limit` characters; else its first `limit` (its last, when
    `keep_end`) and how many more were cut."""
    cut = len(text) - limit
    if cut <= 0:
        return text
    if keep_end:
        return f"({cut:,} characters cut) …{text[-limit:]}"
    return f"{text[:limit]}… ({cut:,} characters cut)"


def storable_text(text: str) -> str:
    """`text` with NUL and lone surrogates written as their escapes (`\\u0000`, `\\ud800`):
    PostgreSQL's text holds neither, and a statement carrying them fails whole."""
    return _UNSTORABLE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(key: str) -> str:
    """`key` with NUL and surrogates escaped, so that a message naming it can be encoded."""
    return json.dumps(key)[1:-1]


def loads(text: str) -> Any:
    """Strict JSON (no NaN/Infinity). Raises ValueError with the reason, JsonLimitError when it
    nests too deep for the parser; what it holds is for `json_errors` to judge."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise JsonLimitError(f"it nests more than {MAX_JSON_DEPTH} arrays and objects") from None


def written_year_in_range(value: datetime) -> bool:
    """Whether `value`'s year, in the offset it was written with, is within the limits."""
    return EARLIEST_YEAR <= value.year <= LATEST_YEAR
