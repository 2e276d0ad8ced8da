"""The audit log (`jobs.audit`), and the trigger that refuses any change to an entry: it is
written once, and only the pruner deletes from it."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

UNCHANGED = """
CREATE OR REPLACE FUNCTION scheduler_audit_unchanged() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    RAISE EXCEPTION 'audit log entries cannot be changed';
END $$;
CREATE TRIGGER audit_log_unchanged BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION scheduler_audit_unchanged();
"""
CHANGEABLE = """
DROP TRIGGER IF EXISTS audit_log_unchanged ON audit_log;
DROP FUNCTION IF EXISTS scheduler_audit_unchanged();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0010_job_metrics"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditEntry",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                ("username", models.CharField(max_length=150)),
                (
                    "source",
                    models.CharField(
                        choices=[("api", "API"), ("console", "Console"), ("admin", "Admin")],
                        max_length=16,
                    ),
                ),
                ("address", models.CharField(blank=True, default="", max_length=64)),
                ("action", models.CharField(max_length=32)),
                ("target", models.CharField(blank=True, default="", max_length=200)),
                ("count", models.PositiveBigIntegerField(default=1)),
                ("summary", models.TextField(blank=True, default="")),
                ("before", models.JSONField(blank=True, null=True)),
                ("after", models.JSONField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "audit entry",
                "verbose_name_plural": "audit log",
                "db_table": "audit_log",
                "ordering": ["-at", "-id"],
                "indexes": [
                    models.Index(fields=["-at", "-id"], name="audit_log_at_idx"),
                    models.Index(fields=["target", "-at"], name="audit_log_target_idx"),
                ],
            },
        ),
        migrations.RunSQL(UNCHANGED, CHANGEABLE),
    ]
