"""Created `scheduler_job_object(jobs)`; its definition now lives in `jobs/sql/schema.sql`,
applied by migration 0005 (kept as an empty step so that applied migration histories still
match).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_worker_job_object_sql")]

    operations: list[migrations.operations.base.Operation] = []
