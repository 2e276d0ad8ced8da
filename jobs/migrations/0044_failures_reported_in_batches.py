"""Failures are reported in batches (`fail_jobs`): `scheduler_close_attempts` takes one
error per attempt (`schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0043_cancelled_attempts_metric")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
