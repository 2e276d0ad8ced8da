"""A job a stopping worker puts back spends no attempt (`rescue_lost_jobs` with `requeue`),
so the counters' trigger, which reads a lower `attempt_count` as no failure, says so
(`scheduler_count_jobs`, `schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0052_webhook_url_checked_by_its_own_rule")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
