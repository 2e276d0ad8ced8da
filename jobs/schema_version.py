"""Whether the database's schema is as new as this code: the migrations it has not applied.

A process started before a release's `manage.py migrate` ran (a rolling deploy's new worker
or web process) would otherwise meet each statement naming a new column as an error of its
own. The worker waits for the migration, saying so (`require_current_schema` raises a
`DatabaseError`, which its reconnect loop waits out); `/readyz` answers 503 meanwhile, so a
load balancer sends the process no request yet. Reading the migration graph costs a few
milliseconds once the migration modules are imported.
"""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor


class SchemaBehind(DatabaseError):
    """The database lacks migrations of this code."""


def unapplied_migrations() -> list[str]:
    """The migrations of this code the database has not applied ("app.name"), in the order
    `migrate` would apply them."""
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [
        f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards
    ]


def require_current_schema() -> None:
    """Raise SchemaBehind, naming what is missing, unless every migration is applied."""
    if missing := unapplied_migrations():
        raise SchemaBehind(
            f"its schema lacks {len(missing)} migration{'s' if len(missing) != 1 else ''} of "
            f"this code ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): "
            "waiting for `manage.py migrate`"
        )
