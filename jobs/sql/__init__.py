"""Named SQL: the hot queries live in `queries.sql` as `-- name: <query>` blocks."""

import re
from functools import cache
from pathlib import Path

_QUERY_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    text = (Path(__file__).parent / "queries.sql").read_text()
    parts = _QUERY_HEADER.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str) -> str:
    return queries()[name]
