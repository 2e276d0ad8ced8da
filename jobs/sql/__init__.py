"""Named SQL: the hot statements live in `queries.sql` as `-- name: <query>` blocks, the SQL
functions they share in `schema.sql`. Only the core's modules run them (`jobs.state`,
`jobs.stats`); everything else calls those modules' named functions."""

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from django.db import connection

_QUERY_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_HERE = Path(__file__).parent


@cache
def queries() -> dict[str, str]:
    text = (_HERE / "queries.sql").read_text()
    parts = _QUERY_HEADER.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str) -> str:
    return queries()[name]


def fetch(name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run the named query; its rows as column name -> value (none for a bare statement)."""
    with connection.cursor() as cursor:
        cursor.execute(query(name), params)
        if cursor.description is None:
            return []
        columns = [column.name for column in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def schema() -> str:
    """`schema.sql`, for the migrations that apply it."""
    return (_HERE / "schema.sql").read_text()


def apply_schema(apps: Any, schema_editor: Any) -> None:
    """A migration's RunPython: (re)create every function of `schema.sql`."""
    with schema_editor.connection.cursor() as cursor:
        # An early migration applies today's file, whose functions may read columns that a
        # later migration adds: bodies are checked when first called, as pg_dump restores
        # (and the migration that adds a column applies the file again).
        # No parameters: the driver sends the file as one multi-statement script, which runs
        # as one transaction even in a non-atomic migration, so SET LOCAL covers it all.
        cursor.execute("SET LOCAL check_function_bodies = off;\n" + schema())
