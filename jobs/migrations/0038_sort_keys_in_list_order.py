"""The priority's and the schedule's indexes in the lists' order of those keys
(`jobs.filters.SORT_ORDERS`: the key, then `created_at` and the id), read forwards or
backwards. `jobs_priority_idx (priority, created_at DESC)` gave no order to ties, broken by
the id in both directions: a page sorted by priority sorted every matching row, 0.38-0.40 s
over a month of history (1,000,000 jobs); `jobs_scheduled_idx (scheduled_at)` sorted the
jobs of one instant (a batch's thousands) at each page. Both keep serving their filters.
Each new index is built before the old one is dropped, no step blocking writes to `jobs`."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("jobs", "0037_status_index_in_list_order")]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["priority", "created_at", "id"], name="jobs_by_priority_idx"
            ),
        ),
        RemoveIndexConcurrently(model_name="job", name="jobs_priority_idx"),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["scheduled_at", "created_at", "id"], name="jobs_by_scheduled_at_idx"
            ),
        ),
        RemoveIndexConcurrently(model_name="job", name="jobs_scheduled_idx"),
    ]
