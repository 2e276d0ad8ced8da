"""Under a limit, the starts a claim lets in are timed after the count of running jobs
(`scheduler_limit_room`, `schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0046_audit_entries_outlive_their_users")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
