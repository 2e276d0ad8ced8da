"""`complete_jobs` unnests its arrays through `scheduler_unsized`, so that PostgreSQL keeps
one plan for a completion of one job (`schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0034_counters_pair_rows_by_grouping")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
