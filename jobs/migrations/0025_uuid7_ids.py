"""New jobs and attempts get time-ordered ids (`scheduler_uuid7`, `schema.sql`): the hot
statements' new rows land on the last pages of their indexes, whatever the history."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0024_failure_counts")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
