"""Queues that operators pause and resume (`jobs.queues`): stored so that a pause outlives
restarts."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0016_job_queue"),
    ]

    operations = [
        migrations.CreateModel(
            name="Queue",
            fields=[
                (
                    "name",
                    models.CharField(
                        max_length=100,
                        primary_key=True,
                        serialize=False,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z0-9_.:-]{1,100}$",
                                "A queue name is 1 to 100 letters, digits, '_', '-', '.' or ':'.",
                            )
                        ],
                    ),
                ),
                ("paused", models.BooleanField(default=False)),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "db_table": "job_queues",
                "ordering": ["name"],
            },
        ),
    ]
