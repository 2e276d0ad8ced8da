"""Limits that hold across all workers (`jobs.queues`): `job_limits`, the starts counted
against rate limits, and the claim's `scheduler_limit_room` (`schema.sql`)."""

import django.db.models.deletion
from django.db import migrations, models

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0017_queues"),
    ]

    operations = [
        migrations.CreateModel(
            name="Limit",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "scope",
                    models.CharField(
                        choices=[("type", "Job type"), ("queue", "Queue")], max_length=8
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("max_running", models.PositiveIntegerField(blank=True, null=True)),
                ("max_starts", models.PositiveIntegerField(blank=True, null=True)),
                ("period_seconds", models.PositiveIntegerField(blank=True, null=True)),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "db_table": "job_limits",
                "ordering": ["scope", "name"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("scope", "name"), name="job_limits_one_per_name"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("scope__in", ["type", "queue"])),
                        name="job_limits_scope_valid",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("max_running__isnull", False),
                            ("max_starts__isnull", False),
                            _connector="OR",
                        ),
                        name="job_limits_limit_something",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(
                                ("max_starts__isnull", True), ("period_seconds__isnull", True)
                            ),
                            models.Q(("max_starts__isnull", False), ("period_seconds__gte", 1)),
                            _connector="OR",
                        ),
                        name="job_limits_starts_have_a_period",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="LimitStart",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("n", models.PositiveIntegerField()),
                (
                    "limit",
                    models.ForeignKey(
                        db_index=False, on_delete=django.db.models.deletion.CASCADE, to="jobs.limit"
                    ),
                ),
            ],
            options={
                "db_table": "job_limit_starts",
                "indexes": [
                    models.Index(fields=["limit", "started_at"], name="job_limit_starts_idx")
                ],
            },
        ),
        migrations.RunPython(apply_schema, migrations.RunPython.noop),
    ]
