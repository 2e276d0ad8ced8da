"""Named SQL: the hot statements live in `queries.sql` as `-- name: <query>` blocks, the SQL
functions they share in `schema.sql`. Only the core's modules run them (`jobs.state`,
`jobs.stats`); everything else calls those modules' named functions."""

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.rows import dict_row

_QUERY_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_HERE = Path(__file__).parent
# Statements `fetch_each` keeps waiting at the server: one is enough to keep it busy while
# this process reads the last one's rows; the second covers a slow turn of this process.
_AHEAD = 2


@cache
def queries() -> dict[str, str]:
    text = (_HERE / "queries.sql").read_text()
    parts = _QUERY_HEADER.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(name: str) -> str:
    return queries()[name]


def fetch(name: str, params: Mapping[str, Any], *, prepared: bool = False) -> list[dict[str, Any]]:
    """Run the named query; its rows as column name -> value (none for a bare statement).

    `prepared`: for the hot statements, whose good plan does not depend on their
    parameters. Django binds parameters on the client, so PostgreSQL parses and plans the
    whole text on every call (for `create_job`, as long as executing it; for a claim of one
    job, longer); psycopg's own cursor binds them on the server and prepares a statement
    once it ran `prepare_threshold` times (5) on a connection: later calls skip the parse,
    and the plan too once PostgreSQL settles on a generic one. Their results come in binary,
    read by psycopg's C loaders: Django's loader of `timestamptz` text is Python (4.4 against
    0.6 us a time, the same aware UTC datetime)."""
    if prepared:
        return _fetch_prepared(query(name), params)
    with connection.cursor() as cursor:
        cursor.execute(query(name), params)
        return _rows(cursor)


def fetch_each(
    name: str, each_params: Iterable[Mapping[str, Any]]
) -> Iterator[list[dict[str, Any]]]:
    """Run the named query once per item of `each_params`, pipelined; each run's rows, in
    order. For a statement that returns rows, repeated over the chunks of one large write,
    inside the caller's transaction.

    Up to `_AHEAD` runs wait at the server beyond the one whose rows the caller is reading.
    One after another, the server would sit idle while this process reads a run's rows and
    encodes the next one's parameters, and this process while the server runs it; here the
    two overlap. `each_params` is read (so a chunk encoded) only when its turn to be sent
    comes."""
    sql = query(name)
    db = _ready_database()
    with db.wrap_database_errors, db.connection.pipeline():
        sent: deque[psycopg.Cursor[dict[str, Any]]] = deque()
        for params in each_params:
            bound = psycopg.Cursor(db.connection, row_factory=dict_row)
            bound.execute(sql, params, binary=True)
            sent.append(bound)
            if len(sent) > _AHEAD:
                yield _all_rows(sent.popleft())
        while sent:
            yield _all_rows(sent.popleft())


def _fetch_prepared(sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    # Straight on Django's psycopg connection, without the cursor wrapper of
    # `connection.cursor()`, which this one statement would not use: a tenth of a single
    # enqueue's Python.
    db = _ready_database()
    with db.wrap_database_errors, psycopg.Cursor(db.connection, row_factory=dict_row) as bound:
        bound.execute(sql, params, binary=True)
        return bound.fetchall() if bound.pgresult and bound.pgresult.nfields else []


def _ready_database() -> BaseDatabaseWrapper:
    """The default database, with what `connection.cursor()` checks first done: a health
    check, a connection, no use from async code. `connections[...]` once: each attribute
    read through the `connection` proxy looks the thread's connection up again."""
    db = connections[DEFAULT_DB_ALIAS]
    db.close_if_health_check_failed()
    db.ensure_connection()
    return db


def _all_rows(bound: psycopg.Cursor[dict[str, Any]]) -> list[dict[str, Any]]:
    # In a pipeline the rows are fetched here: until then the cursor has no result.
    with bound:
        return bound.fetchall()


def _rows(cursor: Any) -> list[dict[str, Any]]:
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
