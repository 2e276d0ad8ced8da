"""Created `scheduler_time()`; its definition now lives in `jobs/sql/schema.sql`, applied
by migration 0005 (kept as an empty step so that applied migration histories still match).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_admin_dead_letter_job")]

    operations: list[migrations.operations.base.Operation] = []
