"""Queues: every job has one, and every cron schedule one for its runs (`default` unless
named), listed by `?queue=`; the job object shows it (`schema.sql`). The column's default is a constant, so adding it rewrites no rows;
the index is built without blocking writes to `jobs`."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("jobs", "0015_cron_schedules")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="queue",
            field=models.CharField(db_default="default", default="default", max_length=100),
        ),
        migrations.AddField(
            model_name="schedule",
            name="queue",
            field=models.CharField(db_default="default", default="default", max_length=100),
        ),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(fields=["queue", "-created_at"], name="jobs_queue_idx"),
        ),
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
    ]
