"""Cron schedules (issue 11.4): the `schedules` table, each job's schedule and the unique
(schedule, slot); `schema.sql` again, as the job object now names its schedule."""

import uuid

import django.db.models.deletion
from django.db import migrations, models

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0014_idempotency_keys"),
    ]

    operations = [
        migrations.CreateModel(
            name="Schedule",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("type", models.CharField(max_length=100)),
                ("payload", models.JSONField(default=dict)),
                ("priority", models.PositiveSmallIntegerField(default=2)),
                ("max_retries", models.PositiveSmallIntegerField(default=3)),
                ("cron", models.CharField(max_length=200)),
                ("timezone", models.CharField(default="UTC", max_length=64)),
                ("paused", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "db_table": "schedules",
                "ordering": ["created_at", "id"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="schedule",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="runs",
                to="jobs.schedule",
            ),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("schedule__isnull", False),
                    models.Q(("status", "cancelled"), _negated=True),
                ),
                fields=("schedule", "scheduled_at"),
                name="jobs_schedule_slot_unique",
            ),
        ),
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
    ]
