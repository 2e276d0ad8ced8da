"""What the `jobs` app's commands share (a module Django lists as no command: its name
starts with an underscore)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from jobs.console.selectors import mask_value


class DatabaseCommand(BaseCommand):
    """A command that works on the database once and exits. It connects before it runs, so
    a database it cannot reach (not created, its server down or elsewhere, a wrong password)
    ends it with one line naming DATABASE_URL and the server's reason, exit code 1, rather
    than a traceback from wherever its first query was. It does not wait for the database
    as the worker does (`runworker`, which runs until stopped): whoever runs it, a person
    or a deploy step, can run it again, and a wait would look like a hang."""

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            connection.ensure_connection()
        except OperationalError as refused:
            raise unreachable(refused) from refused
        return super().execute(*args, **options)


def unreachable(refused: OperationalError) -> CommandError:
    """The one line of a command whose database refused its first connection: DATABASE_URL,
    its password masked, and the server's reason on one line. Django's own commands end on
    it too (manage.py), which connect wherever their first query is."""
    reason = " ".join(str(refused).split())
    shown = mask_value("DATABASE_URL", settings.DATABASE_URL)
    return CommandError(f"DATABASE_URL={shown!r}: {reason}")
