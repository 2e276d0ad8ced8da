"""`scheduler_metric_le` as one inlinable expression (`schema.sql`): with a subquery it was
planned again at every firing of the counters' triggers."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0022_job_object_upstream_ids")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
