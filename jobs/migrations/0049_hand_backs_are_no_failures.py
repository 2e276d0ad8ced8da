"""A claim handed back unstarted is no failed nor retried attempt in the metrics
(`scheduler_count_jobs`, `schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0048_previous_release_closes_attempts")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
