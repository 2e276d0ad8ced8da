"""Retention: the pruner's record (`LastPrune`) and the SQL functions of `schema.sql` it
and the DLQ purge share (`scheduler_waited_on`, `scheduler_delete_jobs`)."""

from django.db import migrations, models

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_job_counts")]

    operations = [
        migrations.CreateModel(
            name="LastPrune",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("checked_at", models.DateTimeField()),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("jobs", models.PositiveBigIntegerField(default=0)),
                ("attempts", models.PositiveBigIntegerField(default=0)),
                ("logs", models.PositiveBigIntegerField(default=0)),
            ],
            options={"db_table": "job_last_prune"},
        ),
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
    ]
