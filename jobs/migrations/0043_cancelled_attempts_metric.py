"""A running attempt cancelled by an operator is `outcome="cancelled"` in
`scheduler_job_run_seconds`, no longer a failure there (`schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0042_job_heartbeat")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
