"""A queue's name is no longer dots alone ("." and ".." are URL path segments that clients
and proxies normalise away: such a queue could not be addressed; `jobs.queue_names`).

The rule is the application's (the database enforces no pattern on a queue's name), so this
changes only the validator of `Queue.name`: no SQL, and no row is rewritten. Jobs and
schedules already in such a queue keep it, and run on the workers that serve all queues; a
pause or a limit stored on such a name stays in force."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0053_releases_are_no_failures"),
    ]

    operations = [
        migrations.AlterField(
            model_name="queue",
            name="name",
            field=models.CharField(
                max_length=100,
                primary_key=True,
                serialize=False,
                validators=[
                    django.core.validators.RegexValidator(
                        "^(?!\\.+$)[A-Za-z0-9_.:-]{1,100}$",
                        "A queue name is 1 to 100 letters, digits, '_', '-', '.' or ':', "
                        "not dots alone.",
                    )
                ],
            ),
        ),
    ]
