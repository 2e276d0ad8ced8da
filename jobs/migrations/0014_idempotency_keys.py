"""Idempotency keys (issue 11.3): one row per key, the first job created under it.

The foreign key to `jobs` is the database's own, `ON DELETE CASCADE`: jobs are also deleted
by SQL (`scheduler_delete_jobs`: DLQ purge, pruning), and the key must go with its job.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0013_job_object_inlined"),
    ]

    operations = [
        migrations.CreateModel(
            name="IdempotencyKey",
            fields=[
                ("key", models.CharField(max_length=255, primary_key=True, serialize=False)),
                ("fingerprint", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField()),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="jobs.job",
                    ),
                ),
            ],
            options={
                "db_table": "idempotency_keys",
            },
        ),
        migrations.RunSQL(
            "ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_job_fk "
            "FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE",
            migrations.RunSQL.noop,
        ),
    ]
