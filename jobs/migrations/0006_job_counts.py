"""Exact job counters kept by the database: `job_counts` and the triggers on `jobs` that
append to it (`jobs/sql/schema.sql`). The jobs already there are counted by migration 0021:
today's `scheduler_recount_jobs` counts by queue, a column of migration 0016."""

from django.db import migrations

from jobs.sql import apply_schema

DROP = """
DROP TRIGGER IF EXISTS jobs_count_inserts ON jobs;
DROP TRIGGER IF EXISTS jobs_count_updates ON jobs;
DROP TRIGGER IF EXISTS jobs_count_deletes ON jobs;
DROP TRIGGER IF EXISTS jobs_count_truncates ON jobs;
DROP FUNCTION IF EXISTS scheduler_recount_jobs();
DROP FUNCTION IF EXISTS scheduler_count_truncate();
DROP FUNCTION IF EXISTS scheduler_count_jobs();
DROP FUNCTION IF EXISTS scheduler_count_key(text, boolean);
DROP TABLE IF EXISTS job_counts;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0005_schema_sql")]

    operations = [
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
        migrations.RunSQL(migrations.RunSQL.noop, DROP),
    ]
