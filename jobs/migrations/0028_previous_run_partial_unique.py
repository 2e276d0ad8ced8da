"""A run's next run stays unique, through a partial index: a job that is no next run (nearly
every job) no longer writes a NULL entry into it when created and at each change of state."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0027_audit_created_in_statement"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="previous_run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="next_runs",
                to="jobs.job",
            ),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(
                condition=models.Q(("previous_run__isnull", False)),
                fields=("previous_run",),
                name="jobs_previous_run_once",
            ),
        ),
    ]
