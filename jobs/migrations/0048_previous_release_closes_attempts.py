"""The previous release's statements close attempts with one error for the batch: that
version of `scheduler_close_attempts` is back beside the batched one, for its processes
during a rolling deploy (`schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0047_limit_clock_read_after_the_count")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
