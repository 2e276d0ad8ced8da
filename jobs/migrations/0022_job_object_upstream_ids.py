"""The job object takes its upstream ids (`scheduler_job_object(jobs, uuid[])` in
`schema.sql`), read by `scheduler_upstream_ids`: with the edges' subquery inside it, the
two-argument form had stopped being inlined, and the hot statements paid a function call
per row. The former `(jobs, uuid)` form goes."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0021_counts_by_queue")]

    operations = [
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
        migrations.RunSQL(
            "DROP FUNCTION IF EXISTS scheduler_job_object(jobs, uuid)", migrations.RunSQL.noop
        ),
    ]
