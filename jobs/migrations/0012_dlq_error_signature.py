"""DLQ triage: each dead letter's error signature (`scheduler_error_signature`, schema.sql),
stored as it dies and indexed for grouping; the dead letters already there get theirs from
their last failed attempt."""

from django.db import migrations, models

from jobs.sql import apply_schema

# A signature moves no counter and no metric, so the counting trigger stays out of it: today's
# schema.sql has it read `jobs.queue`, a column of migration 0016.
BACKFILL = """
ALTER TABLE jobs DISABLE TRIGGER jobs_count_updates;
UPDATE jobs AS j
SET error_signature = scheduler_error_signature(j.type, a.error_type, a.error_message)
FROM (SELECT DISTINCT ON (job_id) job_id, error_type, error_message
      FROM job_attempts WHERE status = 'failed'
      ORDER BY job_id, started_at DESC) AS a
WHERE j.in_dlq AND a.job_id = j.id;
ALTER TABLE jobs ENABLE TRIGGER jobs_count_updates;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0011_audit_log")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="error_signature",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("in_dlq", True)),
                fields=["error_signature", "-updated_at"],
                name="jobs_dlq_signature_idx",
            ),
        ),
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
