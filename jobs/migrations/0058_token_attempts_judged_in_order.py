"""Failed token attempts are counted under a lock per client address, in the order the
attempts reach it, good tokens included (`scheduler_token_attempt`, `schema.sql`)."""

from django.db import migrations

from jobs.sql import apply_schema


class Migration(migrations.Migration):
    dependencies = [("jobs", "0057_limits_keep_past_starts")]

    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
