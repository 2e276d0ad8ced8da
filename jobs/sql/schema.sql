-- The SQL functions of the scheduler: each rule the hot statements of `queries.sql` share is
-- written here once. Every definition is `CREATE OR REPLACE`, so applying the whole file is
-- idempotent; migrations apply it (`jobs.sql.apply_schema`), and a change to this file
-- ships with a new migration that applies it again. Functions that compute a value are
-- plain one-expression SQL functions, which PostgreSQL inlines into the calling statement.

-- A time as the API writes it: ISO 8601 UTC with milliseconds, `2026-06-11T00:00:00.000Z`
-- (`jobs.representation.format_time` is its Python twin, for attempts).
CREATE OR REPLACE FUNCTION scheduler_time(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;

-- Priority with aging: a job ready at `ready_at` should run by this time at the latest, and
-- the claim takes the earliest deadline first. Each priority level is worth 20 minutes of
-- waiting (ARCHITECTURE.md, "Why earliest virtual deadline"). Python twin:
-- `jobs.scheduling.virtual_deadline`, pinned equal by tests/integration/test_schema_sql.py.
CREATE OR REPLACE FUNCTION scheduler_virtual_deadline(priority integer, ready_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT ready_at + priority * interval '20 minutes' $$;

-- The job object of the API and of every `job.*` event, for one `jobs` row. The only
-- place its shape is written: transitions return it, and reads annotate it
-- (`jobs.representation`).
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

-- Close attempts: each of `attempt_ids` finishes at the matching `finished_ats` with
-- `closing_status`, its duration in whole milliseconds, and the error (NULL on success).
-- Every transition that ends an attempt (complete, fail, cancel, rescue) closes it here.
-- Returns how many attempts it closed. Called once per statement, not once per row.
CREATE OR REPLACE FUNCTION scheduler_close_attempts(
    attempt_ids uuid[], finished_ats timestamptz[], closing_status text,
    closing_error_type text, closing_error_message text, closing_stack_trace text
) RETURNS integer
LANGUAGE sql VOLATILE AS
$$ WITH closed AS (
       UPDATE job_attempts AS a
       SET status = closing_status,
           finished_at = f.finished_at,
           duration_ms = greatest(0, floor(extract(epoch FROM f.finished_at - a.started_at) * 1000)),
           error_type = closing_error_type,
           error_message = closing_error_message,
           stack_trace = closing_stack_trace
       FROM unnest(attempt_ids, finished_ats) AS f(id, finished_at)
       WHERE a.id = f.id
       RETURNING 1
   )
   SELECT count(*)::integer FROM closed $$;
