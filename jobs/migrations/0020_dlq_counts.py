"""The DLQ's groups counted by the database (`dlq_counts` and the triggers on `jobs` that
append to it, `jobs/sql/schema.sql`), then one count of the dead letters already there, so
that the console's DLQ page and Dashboard never group the dead letters themselves."""

from django.db import migrations

from jobs.sql import apply_schema

RECOUNT = "SELECT scheduler_recount_dlq();"


class Migration(migrations.Migration):
    dependencies = [("jobs", "0019_worker_queues")]

    operations = [
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
        # Backwards the table stays: the triggers of the schema applied go on feeding it.
        migrations.RunSQL(RECOUNT, migrations.RunSQL.noop),
    ]
