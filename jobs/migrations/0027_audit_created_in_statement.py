"""A job's creation is audited by the statement that creates it (`scheduler_audit_created`,
`schema.sql`): an operator's POST costs one round trip, not a transaction of four."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0026_release_in_completion")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
