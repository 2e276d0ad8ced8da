"""Batch idempotency keys written before 0045's release named their first job, whose
foreign key deletes the key with it: they name none now, as new batch keys do
(`jobs.state._under_key`). Keys an old web process writes during the rolling deploy keep the
old shape until their window ends."""

from django.db import migrations

BATCH_KEYS_NAME_NO_JOB = "UPDATE idempotency_keys SET job_id = NULL WHERE job_ids IS NOT NULL"


class Migration(migrations.Migration):
    dependencies = [("jobs", "0049_hand_backs_are_no_failures")]

    operations = [migrations.RunSQL(BATCH_KEYS_NAME_NO_JOB, migrations.RunSQL.noop)]
