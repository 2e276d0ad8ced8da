"""The status filters' index in the lists' order, `(status, in_dlq, created_at DESC, id)`,
instead of `(status, in_dlq)`: a page of a status is then one range of the index, read in
order. With the old one, a filter matching few jobs walked `jobs_created_idx` from the
newest job on: over a month of history with no job waiting for a retry, `status=failed`
stepped over all 1,000,000 rows (0.2 s warm, 4.2 s cold). Built before the old index is
dropped, neither step blocking writes to `jobs`."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("jobs", "0036_writing_functions_keep_their_plans")]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["status", "in_dlq", "-created_at", "id"], name="jobs_status_created_idx"
            ),
        ),
        RemoveIndexConcurrently(model_name="job", name="jobs_status_idx"),
    ]
