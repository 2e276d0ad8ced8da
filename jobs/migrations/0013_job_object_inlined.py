"""The job object's shape as an inlinable SQL function of a row and its dependency
(`scheduler_job_object(jobs, uuid)` in `schema.sql`); the one-argument form reads the
dependency and calls it."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0012_dlq_error_signature")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
