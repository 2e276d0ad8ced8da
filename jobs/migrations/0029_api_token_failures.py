"""Failed API token attempts per client address move from the cache to PostgreSQL, where the
token's own statement reads them (`jobs.api.auth`)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0028_previous_run_partial_unique")]

    operations = [
        migrations.CreateModel(
            name="FailedTokenCount",
            fields=[
                ("address", models.TextField(primary_key=True, serialize=False)),
                ("failures", models.PositiveIntegerField()),
                ("period_ends", models.DateTimeField(db_index=True)),
            ],
            options={"db_table": "api_token_failures"},
        ),
    ]
