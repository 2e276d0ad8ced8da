"""The counters' triggers pair a changed row's states before and after by a grouping on its
id, not a join of the transition tables, which PL/pgSQL kept as a nested loop: quadratic in
the rows one statement changes (`schema.sql`, `scheduler_count_jobs`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0033_claim_admission_function")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
