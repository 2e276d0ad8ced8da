"""Idempotency keys past the window are pruned (`prune_idempotency_keys`), by this index: a
batch's key no longer goes with its first job."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0044_failures_reported_in_batches")]

    operations = [
        migrations.AddIndex(
            model_name="idempotencykey",
            index=models.Index(fields=["created_at"], name="idempotency_keys_created_idx"),
        ),
    ]
