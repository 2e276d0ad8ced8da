"""A rate limit keeps the starts past its period for a day, folded per second, so that a
longer period counts them (`job_limit_past_starts`, `scheduler_limit_starts`, `schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0055_audit_create_summary_names_the_type")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
