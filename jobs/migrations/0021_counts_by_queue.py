"""Job counters and metrics by the job's real queue (`schema.sql`): `job_counts` gains a
`queue` column, the counting triggers group by it and the metrics read `jobs.queue` instead
of the `default` placeholder (whose function is dropped), then the jobs already there are
counted once more, by state and queue (`scheduler_recount_jobs`, under a SHARE lock on
`jobs`: writers wait for one count of the table). Metrics counted before stay under
`default`: they are history, with no queue to give back."""

from django.db import migrations

from jobs.sql import apply_schema

# A fresh database already has the column: migration 0006 created the table from today's
# schema.sql.
ADD_QUEUE = "ALTER TABLE job_counts ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';"

DROP_PLACEHOLDER = "DROP FUNCTION IF EXISTS scheduler_metric_queue(jobs);"

RECOUNT = "SELECT scheduler_recount_jobs();"


class Migration(migrations.Migration):
    dependencies = [("jobs", "0020_dlq_counts")]

    operations = [
        migrations.RunSQL(ADD_QUEUE, migrations.RunSQL.noop),
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
        migrations.RunSQL(DROP_PLACEHOLDER, migrations.RunSQL.noop),
        migrations.RunSQL(RECOUNT, migrations.RunSQL.noop),
    ]
