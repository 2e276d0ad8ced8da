"""A job's creation appends to the DLQ's groups only when a new row is a dead letter
(`scheduler_count_jobs`, `schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0030_worker_references_unchecked")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
