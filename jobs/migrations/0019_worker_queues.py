"""Workers record the queues they serve (`runworker --queues`, `--queue NAME=N`), so that an
explanation of a waiting job can say whether a live worker serves its queue."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0018_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="other_queues",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=100),
                blank=True,
                db_default=[],
                default=list,
                size=None,
            ),
        ),
        migrations.AddField(
            model_name="worker",
            name="queues",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=100), blank=True, null=True, size=None
            ),
        ),
    ]
