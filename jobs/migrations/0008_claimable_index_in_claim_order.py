"""The claimable index in claim order (virtual deadline, created, id) instead of on `run_at`:
the claim and the feeder read its first entries and stop, whatever the statistics."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0007_last_prune"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="job",
            name="jobs_claimable_idx",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(
                    ("in_dlq", False),
                    ("pending_dependencies", 0),
                    ("status__in", ["pending", "failed"]),
                ),
                fields=["virtual_deadline", "created_at", "id"],
                name="jobs_claimable_idx",
            ),
        ),
    ]
