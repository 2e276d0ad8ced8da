"""A created job's audit entry reads "Created a job of type echo" (`scheduler_audit_created`,
`schema.sql`): "Created a echo job" took its article before any type's name. Entries written
before keep their summary: the log is written once."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0054_queue_names_not_only_dots")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
