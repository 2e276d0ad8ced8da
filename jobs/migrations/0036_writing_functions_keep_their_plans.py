"""Less work per transition in PostgreSQL (`schema.sql`): `scheduler_close_attempts` and
`scheduler_audit_created` become PL/pgSQL, which keeps its plans for the session (as SQL
functions they were planned at every call), and the job counters' trigger writes the
counters and the metrics in one statement, the DLQ's groups only when a dead letter moved."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0035_completion_planned_once")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
