"""Apply `jobs/sql/schema.sql`, the SQL functions the hot statements share.

The file, not this migration, holds their definitions; every one is `CREATE OR REPLACE`,
so a later change to the file ships with a new migration running this same operation.
"""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0004_job_object_sql_function")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
