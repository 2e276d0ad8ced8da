"""A claim's admission under the limits is a function (`scheduler_claim_admission`,
`schema.sql`) rather than CTEs of `claim_jobs`, and the claim takes its ids through
`scheduler_claim_ids`."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0032_job_object_row_type")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
