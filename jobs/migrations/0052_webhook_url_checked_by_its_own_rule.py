"""A webhook's URL is checked by `jobs.webhooks.validate` (`outbound.sendable_url`), as the API
and the console check it, not by Django's URLValidator, which refused a host without a dot in
the admin and took what no request can be sent to. The column stays varchar(500): no SQL."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0051_audit_log_action_and_source_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="webhook",
            name="url",
            field=models.CharField(max_length=500),
        ),
    ]
