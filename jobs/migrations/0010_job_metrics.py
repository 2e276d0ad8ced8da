"""Prometheus metrics kept by the database: `job_metrics` and its triggers (`schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0009_index_diet")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
