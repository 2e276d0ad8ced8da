"""Index diet: drop the indexes nothing reads (ARCHITECTURE.md, "Every index and what uses
it"): the foreign-key indexes duplicated by (job_id, started_at) and (job_id, created_at),
and the worker_id ones (reads by worker use the partial jobs_worker_idx).

Only the indexes go: the state says `db_index=False`, the database drops the index and
keeps its foreign key as it is (re-creating a constraint would re-check every row).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0008_claimable_index_in_claim_order"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="job",
                    name="worker",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="jobs",
                        to="jobs.worker",
                    ),
                ),
                migrations.AlterField(
                    model_name="jobattempt",
                    name="job",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempts",
                        to="jobs.job",
                    ),
                ),
                migrations.AlterField(
                    model_name="jobattempt",
                    name="worker",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="attempts",
                        to="jobs.worker",
                    ),
                ),
                migrations.AlterField(
                    model_name="joblog",
                    name="job",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="logs",
                        to="jobs.job",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {index}", f"CREATE INDEX {index} ON {table} ({column})"
                )
                for index, table, column in (
                    ("jobs_worker_id_df79821a", "jobs", "worker_id"),
                    ("job_attempts_job_id_ce59b16b", "job_attempts", "job_id"),
                    ("job_attempts_worker_id_854ce82a", "job_attempts", "worker_id"),
                    ("job_logs_job_id_6b3fd931", "job_logs", "job_id"),
                )
            ],
        )
    ]
