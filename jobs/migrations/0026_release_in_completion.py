"""A completion releases the dependents of its jobs in its own statement
(`scheduler_release_dependents`, `schema.sql`), which skips the write when no edge exists."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0025_uuid7_ids")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
