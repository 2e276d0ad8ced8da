"""Failed attempts counted by the database per quarter of an hour (`failure_counts` and the
triggers on `job_attempts` that append to it, `jobs/sql/schema.sql`), then one count of the
failed attempts already there, so that the console's "failed attempts per hour" chart never
counts `job_attempts` itself. The quarter-hour function shared with `dlq_counts` is renamed."""

from django.db import migrations

from jobs.sql import apply_schema

RECOUNT = """
SELECT scheduler_recount_failures();
DROP FUNCTION IF EXISTS scheduler_dlq_bucket(timestamptz);
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0023_metric_bucket_inlined")]

    operations = [
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
        # Backwards the table stays: the triggers of the schema applied go on feeding it.
        migrations.RunSQL(RECOUNT, migrations.RunSQL.noop),
    ]
