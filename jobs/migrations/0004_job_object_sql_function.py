"""`scheduler_job_object(jobs)`: the API job object of a `jobs` row, built in SQL.

The claim and the completion both return it (see migration 0003 for why it is built in
SQL at all); one function keeps a single SQL copy of the shape. `represent_row` stays
the reference and a test pins the two equal.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION scheduler_job_object(j jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT json_build_object(
       'id', j.id, 'type', j.type, 'payload', j.payload, 'priority', j.priority,
       'status', j.status, 'attempt_count', j.attempt_count,
       'max_retries', j.max_retries, 'scheduled_at', scheduler_time(j.scheduled_at),
       'recur_interval', j.recur_interval,
       'depends_on', (SELECT dep.depends_on_id FROM job_dependencies dep
                      WHERE dep.job_id = j.id ORDER BY dep.id LIMIT 1),
       'in_dlq', j.in_dlq, 'created_at', scheduler_time(j.created_at),
       'updated_at', scheduler_time(j.updated_at),
       'started_at', scheduler_time(j.started_at),
       'completed_at', scheduler_time(j.completed_at),
       'cancelled_at', scheduler_time(j.cancelled_at),
       'next_retry_at', scheduler_time(j.next_retry_at),
       'last_error', j.last_error, 'result', j.result, 'worker_id', j.worker_id) $$;
"""

DROP = """
DROP FUNCTION IF EXISTS scheduler_job_object(jobs);
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_worker_job_object_sql")]

    operations = [migrations.RunSQL(CREATE, DROP)]
