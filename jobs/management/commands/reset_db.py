"""`manage.py reset_db`: drop the database's schema and migrate it back, for a clean slate."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser
from django.db import connection

from jobs.management.commands._database import DatabaseCommand


class Command(DatabaseCommand):
    help = (
        "Drop the `public` schema (every table: jobs, workers, users, tokens) and recreate it "
        "with all migrations. Refuses when DEBUG is off, unless --force. Stop the web server "
        "and workers first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="run even when DEBUG is off")

    def handle(self, *args: Any, **options: Any) -> None:
        database = connection.settings_dict["NAME"]
        if not settings.DEBUG and not options["force"]:
            raise CommandError(
                f"DEBUG is off: this may be a production database ({database}), and reset_db "
                "deletes every job, worker, user and token in it. Pass --force if you mean it."
            )
        # Dropping the schema rather than flushing tables also removes what migrations
        # created outside models (the SQL functions of jobs/migrations), and re-running
        # them puts all of it back exactly as on a fresh install.
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP SCHEMA public CASCADE;"
                " CREATE SCHEMA public AUTHORIZATION pg_database_owner;"
                " GRANT USAGE ON SCHEMA public TO PUBLIC;"
            )
        ContentType.objects.clear_cache()
        verbosity = max(0, options["verbosity"] - 1)
        call_command("migrate", interactive=False, verbosity=verbosity, stdout=self.stdout)
        if options["verbosity"]:
            self.stdout.write(
                self.style.SUCCESS(f"Database {database}: schema dropped and recreated, migrated.")
            )
