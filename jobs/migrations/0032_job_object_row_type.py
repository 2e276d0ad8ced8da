"""The job object is a row of `scheduler_job_fields` written by `row_to_json`
(`scheduler_job_object`, `schema.sql`), not a `json_build_object` call."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0031_lighter_job_creation")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
