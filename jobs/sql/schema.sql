-- The SQL functions of the scheduler: each rule the hot statements of `queries.sql` share is
-- written here once. Every definition is `CREATE OR REPLACE`, so applying the whole file is
-- idempotent; migrations apply it (`jobs.sql.apply_schema`), and a change to this file
-- ships with a new migration that applies it again. Functions that compute a value are
-- plain one-expression SQL functions, which PostgreSQL inlines into the calling statement.
-- Functions that write, which it cannot inline, are PL/pgSQL when a hot statement calls
-- them: PL/pgSQL keeps its plans for the session, where PostgreSQL (before 18) parses and
-- plans the body of a SQL function that it does not inline at every statement calling it.

-- A time as the API writes it: ISO 8601 UTC with milliseconds, `2026-06-11T00:00:00.000Z`
-- (`jobs.representation.format_time` is its Python twin, for attempts).
CREATE OR REPLACE FUNCTION scheduler_time(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;

-- A new job's or attempt's id: a UUID version 7 (RFC 9562), its first 48 bits the time in
-- milliseconds, the rest random. New ids sort after the ids before them, so a new row's
-- entries in the primary keys of `jobs` and `job_attempts` and in `job_attempts_job_idx`
-- land on the last leaf pages, not on a random page of an index as large as the history:
-- over 1M jobs, opening 200 attempts with random ids read 400-500 index pages and wrote
-- 390 full-page images (1.3 MB of WAL, 15-30 ms); with these ids, 4-8 pages, no full-page
-- image (0.06 MB, 2-6 ms), as on an empty table (EXPLAIN ANALYZE, BUFFERS, WAL).
CREATE OR REPLACE FUNCTION scheduler_uuid7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS
$$ SELECT encode(set_bit(set_bit(
       overlay(uuid_send(gen_random_uuid())
               PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                                 FROM 3)
               FROM 1 FOR 6),
       52, 1), 53, 1), 'hex')::uuid $$;

-- Priority with aging: a job ready at `ready_at` should run by this time at the latest, and
-- the claim takes the earliest deadline first. Each priority level is worth 20 minutes of
-- waiting (ARCHITECTURE.md, "Why earliest virtual deadline"). Python twin:
-- `jobs.scheduling.virtual_deadline`, pinned equal by tests/integration/test_schema_sql.py.
CREATE OR REPLACE FUNCTION scheduler_virtual_deadline(priority integer, ready_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT ready_at + priority * interval '20 minutes' $$;

-- The error signature a dead letter is grouped under in the DLQ: its job type, its error
-- class, and its message with what varies between occurrences masked: quoted values
-- ('…', "…") as ?, UUIDs and long hex ids as <id>, numbers as N; whitespace collapsed. The
-- one masking rule: `fail_jobs` and `rescue_lost_jobs` store it on the job as it dies.
CREATE OR REPLACE FUNCTION scheduler_error_signature(type text, error_type text, message text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT rtrim(left(type || ' · ' || coalesce(error_type, 'Error') || ': ' ||
       btrim(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
           coalesce(message, ''),
           $re$'[^']*'|"[^"]*"$re$, '?', 'g'),
           '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|'
           '\m(0x)?(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,}\M', '<id>', 'g'),
           '[0-9]+([.][0-9]+)?', 'N', 'g'),
           '\s+', ' ', 'g')),
       500)) $$;

-- The fields of the job object of the API and of every `job.*` event, in order: the job
-- object is a row of this type, which `row_to_json` writes under these names. A declared
-- row type rather than `json_build_object`, which looks up the type of each of its 46
-- arguments at every call: 10 us a job object against 6 (66,001 objects, built five times
-- each way in turns). PostgreSQL has no `CREATE OR REPLACE TYPE`, so this creates it once:
-- a change of the shape drops the type in its migration (`DROP TYPE ... CASCADE`, which
-- takes `scheduler_job_object` with it) before the file is applied again.
DO $$ BEGIN
    CREATE TYPE scheduler_job_fields AS (
        id uuid, type text, payload jsonb, priority integer, status text,
        attempt_count integer, max_retries integer, scheduled_at text, recur_interval text,
        depends_on uuid, in_dlq boolean, created_at text, updated_at text, started_at text,
        completed_at text, cancelled_at text, next_retry_at text, last_error text,
        result jsonb, worker_id uuid, schedule_id uuid, upstream_ids uuid[], queue text
    );
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- The job object for one `jobs` row and the ids of the jobs it depends on
-- (`job_dependencies`, in the order the edges were written; `depends_on` is the first).
-- The only place its shape is written, with `scheduler_job_fields`: transitions return it,
-- and reads annotate it (`jobs.representation`). One expression with no subquery, so
-- PostgreSQL inlines it into the calling statement: called as a function it cost twice as
-- much. A statement that knows the edges passes them (a job it just created has none:
-- '{}'); the hot ones join `scheduler_upstream_ids` laterally, which keeps the call inlined.
CREATE OR REPLACE FUNCTION scheduler_job_object(j jobs, upstream_ids uuid[]) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT row_to_json(ROW(
       j.id, j.type, j.payload, j.priority, j.status, j.attempt_count, j.max_retries,
       scheduler_time(j.scheduled_at), j.recur_interval, upstream_ids[1], j.in_dlq,
       scheduler_time(j.created_at), scheduler_time(j.updated_at),
       scheduler_time(j.started_at), scheduler_time(j.completed_at),
       scheduler_time(j.cancelled_at), scheduler_time(j.next_retry_at),
       j.last_error, j.result, j.worker_id, j.schedule_id, upstream_ids, j.queue
   )::scheduler_job_fields) $$;

-- The ids of the jobs `of_job` depends on, in the order its edges were written ('{}': none),
-- as one row: a set-returning SQL function of one SELECT, so a statement that joins it
-- laterally (`CROSS JOIN LATERAL scheduler_upstream_ids(j.id) AS up`) gets it inlined.
CREATE OR REPLACE FUNCTION scheduler_upstream_ids(of_job uuid) RETURNS TABLE (ids uuid[])
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT coalesce(array_agg(dep.depends_on_id ORDER BY dep.id), '{}')
   FROM job_dependencies dep WHERE dep.job_id = of_job $$;

-- The job object of a row, its edges read from `job_dependencies`: for reads and the
-- transitions off the hot path (a function call per row).
CREATE OR REPLACE FUNCTION scheduler_job_object(j jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT scheduler_job_object(j, up.ids) FROM scheduler_upstream_ids(j.id) AS up $$;

-- An operator's creation of a job, in the audit log (`jobs.audit`): who (`actor`: user_id,
-- username, source, address, as `jobs.audit.actor_fields` names them), the job, and what it
-- was created with. The statement that creates a job writes it (`create_job`), so an API
-- request's job and its entry cost one round trip; a job created in several statements (with
-- dependencies, a schedule's first run) gets it from `audit_created_job` once its edges are
-- written, in the same transaction. PL/pgSQL (see the top of this file): as a SQL function
-- it was planned at every API request, 0.17 ms of the 0.57 ms the creating statement took
-- (median of 250 `EXPLAIN ANALYZE`s each way).
CREATE OR REPLACE FUNCTION scheduler_audit_created(j jobs, upstream_ids uuid[], actor jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE AS
$$ BEGIN
    INSERT INTO audit_log (at, user_id, username, source, address, action, target, count,
                           summary, before, after)
    VALUES (now(), (actor->>'user_id')::integer, actor->>'username', actor->>'source',
            actor->>'address', 'create', j.id::text, 1, 'Created a job of type ' || j.type, NULL,
            jsonb_build_object('type', j.type, 'payload', j.payload, 'priority', j.priority,
                               'scheduled_at', scheduler_time(j.scheduled_at),
                               'depends_on', upstream_ids[1]));
END $$;

-- Close attempts: each of `attempt_ids` finishes at the matching `finished_ats` with
-- `closing_status`, its duration in whole milliseconds, and the matching error of
-- `error_types`, `error_messages` and `stack_traces` (NULL arrays on success).
-- Every transition that ends an attempt (complete, fail, cancel, rescue) closes it here.
-- Returns how many attempts it closed. Called once per statement, not once per row.
-- PL/pgSQL (see the top of this file): as a SQL function it was planned at every
-- completion, half of the 0.7 ms it took to close one attempt (`EXPLAIN ANALYZE` of
-- `complete_jobs`, median of 100 each way).
CREATE OR REPLACE FUNCTION scheduler_close_attempts(
    attempt_ids uuid[], finished_ats timestamptz[], closing_status text,
    error_types text[], error_messages text[], stack_traces text[]
) RETURNS integer
LANGUAGE plpgsql VOLATILE AS
$$
DECLARE
    closed integer;
BEGIN
    UPDATE job_attempts AS a
    SET status = closing_status,
        finished_at = f.finished_at,
        duration_ms = greatest(0, floor(extract(epoch FROM f.finished_at - a.started_at) * 1000)),
        error_type = f.error_type,
        error_message = f.error_message,
        stack_trace = f.stack_trace
    FROM unnest(attempt_ids, finished_ats, error_types, error_messages, stack_traces)
         AS f(id, finished_at, error_type, error_message, stack_trace)
    WHERE a.id = f.id;
    GET DIAGNOSTICS closed = ROW_COUNT;
    RETURN closed;
END
$$;

-- The version before batched failures (migration 0044): one error for the whole batch. The
-- previous release's statements call it, and its processes run against this schema during
-- a rolling deploy (the release phase migrates first); kept for them, as a call of the one
-- above, until the release after. Both match a call with bare NULLs or quoted literals;
-- PostgreSQL then prefers this one (text is the string category), as those statements
-- mean, and this release's calls name their arrays' type.
CREATE OR REPLACE FUNCTION scheduler_close_attempts(
    attempt_ids uuid[], finished_ats timestamptz[], closing_status text,
    closing_error_type text, closing_error_message text, closing_stack_trace text
) RETURNS integer
LANGUAGE sql VOLATILE AS
$$ SELECT scheduler_close_attempts(
       attempt_ids, finished_ats, closing_status,
       array_fill(closing_error_type, ARRAY[coalesce(cardinality(attempt_ids), 0)]),
       array_fill(closing_error_message, ARRAY[coalesce(cardinality(attempt_ids), 0)]),
       array_fill(closing_stack_trace, ARRAY[coalesce(cardinality(attempt_ids), 0)])) $$;

-- Count the completion of `upstream_ids` against their dependents; the dependents whose last
-- upstream job completed become runnable now, and are returned. `complete_jobs` calls it once,
-- after its UPDATE (its argument reads every completed row), in the same statement: as a
-- VOLATILE function, each statement here takes a fresh snapshot, so it sees the edge of an
-- enqueue whose lock on an upstream row the completion waited for (`lock_upstream_jobs`), as
-- a later statement of the transaction would. With no edge from any of them (most jobs) it
-- writes nothing: no UPDATE, so no firing of the counters' trigger. PL/pgSQL keeps its plans
-- for the session.
CREATE OR REPLACE FUNCTION scheduler_release_dependents(upstream_ids uuid[])
RETURNS TABLE (id uuid, type text, priority integer, run_at timestamptz, created_at timestamptz)
LANGUAGE plpgsql VOLATILE AS
$$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM job_dependencies dep WHERE dep.depends_on_id = ANY(upstream_ids))
    THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH counted AS (
        UPDATE jobs AS j
        SET pending_dependencies = greatest(0, j.pending_dependencies - released.upstream_done),
            run_at = greatest(j.run_at, now()),
            virtual_deadline = scheduler_virtual_deadline(j.priority, greatest(j.run_at, now())),
            updated_at = now()
        FROM (SELECT dep.job_id, count(*) AS upstream_done
              FROM job_dependencies dep
              WHERE dep.depends_on_id = ANY(upstream_ids)
              GROUP BY dep.job_id) AS released
        WHERE j.id = released.job_id AND j.status = 'pending' AND j.pending_dependencies > 0
        RETURNING j.id, j.type, j.priority, j.run_at, j.created_at, j.pending_dependencies
    )
    SELECT c.id, c.type::text, c.priority::integer, c.run_at, c.created_at
    FROM counted c WHERE c.pending_dependencies = 0;
END
$$;

-- Exact job counters (`/jobs/stats`, `stats.updated`, the console's cards and DLQ badge),
-- kept by the database itself in the transaction of every change to `jobs`, whoever makes
-- it: transitions, purges, the pruner, a bulk load, a TRUNCATE.
--
-- `job_counts` is insert-only for writers: each statement that moves jobs between counters
-- appends one row per counter and queue it moved (`n` may be negative). Appends never wait
-- on each other, so no row is hot and no worker's transaction queues behind another's, as
-- one shared row per counter would make them (its lock is held until commit). The counters
-- are the sums of `n` (`job_stats`, and per queue `job_counts_by_queue`); `fold_job_counts`
-- periodically collapses the rows into one per counter and queue, so a read sums a few
-- hundred rows whatever the size of `jobs`. (Migration 0021 added `queue` to the table.)
CREATE TABLE IF NOT EXISTS job_counts (
    key text NOT NULL,
    queue text NOT NULL DEFAULT 'default',
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- The counter a job is counted under: its status, except that the dead-letter queue is
-- its own counter (`failed` then counts only jobs waiting for a retry).
CREATE OR REPLACE FUNCTION scheduler_count_key(status text, in_dlq boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN in_dlq THEN 'dlq' ELSE status END $$;

-- The dead-letter queue's groups, counted like `job_counts` (appended by the same triggers,
-- summed when read, folded by `fold_dlq_counts`), so that the console's DLQ page and
-- Dashboard never group the dead letters themselves: their work follows the variety of the
-- errors, not the number of dead letters. Two kinds of row, from one GROUPING SETS:
-- - totals (`bucket` NULL): dead letters per job type, error signature and message;
-- - recent arrivals (`type` and `last_error` NULL): dead letters per error signature and
--   quarter of an hour of `updated_at` (`scheduler_quarter_hour`), from which a day in any
--   time zone is summed exactly (every zone's offset is whole quarters of an hour). The
--   fold drops those older than the console shows.
CREATE TABLE IF NOT EXISTS dlq_counts (
    type text,
    error_signature text,
    last_error text,
    bucket timestamptz,
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- The quarter of an hour `t` falls in (its start).
CREATE OR REPLACE FUNCTION scheduler_quarter_hour(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT date_bin(interval '15 minutes', t, timestamptz '2000-01-01 00:00:00+00') $$;

-- A statement-level trigger: one aggregate over the statement's transition tables, so a
-- claim of 250 jobs of one queue appends two rows, not 500. A trigger sees only the
-- transition tables it declared, hence one branch per operation. The same pass appends the
-- dead letters it moved to the DLQ's groups (`dlq_counts`, above) and the statement's
-- metrics (`job_metrics`, below): created; for an update each change of state (a row may
-- count under several names: a failure that entered the DLQ is `failed` and
-- `dead_lettered`) and the wait from due (`run_at`) to the claim. `failed` is an attempt
-- that ended without success (its handler failed, its worker was lost), `retried` those of
-- them that will run again; a claim handed back unstarted, or a job a stopping worker put
-- back (a release), is neither (its `attempt_count` goes down), though its next claim is a
-- second `wait_seconds` sample of the job.
-- What a firing costs is mostly setting up its statements' plans, whatever the rows: so
-- the counters and the metrics are one statement, the DLQ's groups are written only when a
-- dead letter is among the rows (rarely), and the metrics' names come from one array
-- rather than a union of seven subqueries. A claim of one job: 0.20 ms in the trigger
-- before, 0.15-0.17 ms after (medians of 120 `EXPLAIN ANALYZE`s, in turns, twice).
CREATE OR REPLACE FUNCTION scheduler_count_jobs() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH counted AS (
            INSERT INTO job_counts (key, queue, n)
            SELECT scheduler_count_key(status, in_dlq), queue, count(*) FROM new_rows GROUP BY 1, 2
        )
        INSERT INTO job_metrics (name, type, queue, n)
        SELECT 'created', r.type, r.queue, count(*) FROM new_rows AS r
        GROUP BY 2, 3;
        -- A new job is almost never a dead letter (a seed's or an import's).
        IF EXISTS (SELECT FROM new_rows WHERE in_dlq) THEN
            INSERT INTO dlq_counts (type, error_signature, last_error, bucket, n)
            SELECT type, error_signature, last_error, scheduler_quarter_hour(updated_at),
                   count(*)
            FROM new_rows WHERE in_dlq
            GROUP BY GROUPING SETS ((type, error_signature, last_error),
                                    (error_signature, scheduler_quarter_hour(updated_at)));
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_counts (key, queue, n)
        SELECT scheduler_count_key(status, in_dlq), queue, -count(*) FROM old_rows GROUP BY 1, 2;
        INSERT INTO dlq_counts (type, error_signature, last_error, bucket, n)
        SELECT type, error_signature, last_error, scheduler_quarter_hour(updated_at), -count(*)
        FROM old_rows WHERE in_dlq
        GROUP BY GROUPING SETS ((type, error_signature, last_error),
                                (error_signature, scheduler_quarter_hour(updated_at)));
    ELSE
        IF EXISTS (SELECT FROM old_rows WHERE in_dlq) OR EXISTS (SELECT FROM new_rows WHERE in_dlq)
        THEN
            INSERT INTO dlq_counts (type, error_signature, last_error, bucket, n)
            SELECT type, error_signature, last_error, bucket, sum(n)
            FROM (SELECT type, error_signature, last_error,
                         scheduler_quarter_hour(updated_at) AS bucket, 1 AS n
                  FROM new_rows WHERE in_dlq
                  UNION ALL
                  SELECT type, error_signature, last_error, scheduler_quarter_hour(updated_at), -1
                  FROM old_rows WHERE in_dlq) AS moved
            GROUP BY GROUPING SETS ((type, error_signature, last_error), (error_signature, bucket))
            HAVING sum(n) <> 0;
        END IF;
        -- Each changed row's state before and after, paired by a grouping on its id, not
        -- by a join of the two transition tables: PL/pgSQL plans a trigger's statements
        -- once per session, with the tables as the first firing filled them (one row), and
        -- kept a nested loop over them, quadratic in the rows a statement changes (a
        -- claim of 250 jobs compared 62,500 pairs; completing 13,000 at once took 24 s
        -- here). A grouping costs the same for one row and grows with n log n at worst.
        WITH c AS (
            SELECT min(s.type) FILTER (WHERE s.after) AS type,
                   min(s.queue) FILTER (WHERE NOT s.after) AS was_queue,
                   min(s.queue) FILTER (WHERE s.after) AS queue,
                   min(s.status) FILTER (WHERE NOT s.after) AS was,
                   min(s.status) FILTER (WHERE s.after) AS status,
                   bool_or(s.in_dlq) FILTER (WHERE NOT s.after) AS was_in_dlq,
                   bool_or(s.in_dlq) FILTER (WHERE s.after) AS in_dlq,
                   min(s.run_at) FILTER (WHERE NOT s.after) AS was_due,
                   min(s.started_at) FILTER (WHERE s.after) AS started_at,
                   -- Lower after than before only for a hand-back or a release.
                   min(s.attempt_count) FILTER (WHERE NOT s.after) AS was_attempts,
                   min(s.attempt_count) FILTER (WHERE s.after) AS attempts
            FROM (SELECT false AS after, id, type, queue, status, in_dlq, run_at, started_at,
                         attempt_count
                  FROM old_rows
                  UNION ALL
                  SELECT true, id, type, queue, status, in_dlq, run_at, started_at,
                         attempt_count
                  FROM new_rows) AS s
            GROUP BY s.id
        ), counted AS (
            INSERT INTO job_counts (key, queue, n)
            SELECT key, queue, sum(n)
            FROM (SELECT scheduler_count_key(c.status, c.in_dlq) AS key, c.queue, 1 AS n FROM c
                  UNION ALL
                  SELECT scheduler_count_key(c.was, c.was_in_dlq), c.was_queue, -1 FROM c) AS moved
            GROUP BY key, queue
            HAVING sum(n) <> 0
        ), changes AS (
            SELECT c.type, c.queue,
                   unnest(ARRAY[
                       CASE WHEN c.status = 'completed' AND c.was <> 'completed' THEN 'completed' END,
                       CASE WHEN c.was = 'processing' AND c.status IN ('failed', 'pending')
                                 AND c.attempts >= c.was_attempts THEN 'failed' END,
                       CASE WHEN c.was = 'processing' AND c.status IN ('failed', 'pending')
                                 AND c.attempts >= c.was_attempts AND NOT c.in_dlq
                            THEN 'retried' END,
                       CASE WHEN c.in_dlq AND NOT c.was_in_dlq THEN 'dead_lettered' END,
                       CASE WHEN c.was_in_dlq AND NOT c.in_dlq THEN 'dlq_retried' END,
                       CASE WHEN c.status = 'cancelled' AND c.was <> 'cancelled' THEN 'cancelled' END,
                       CASE WHEN c.status = 'processing' AND c.was <> 'processing'
                            THEN 'wait_seconds' END
                   ]) AS name,
                   greatest(0, extract(epoch FROM c.started_at - c.was_due))::double precision
                       AS waited
            FROM c
        )
        INSERT INTO job_metrics (name, type, queue, le, n, total)
        SELECT m.name, m.type, m.queue, m.le, count(*), sum(m.value)
        FROM (SELECT name, type, queue,
                     CASE WHEN name = 'wait_seconds' THEN scheduler_metric_le(waited)
                          ELSE 'Infinity' END AS le,
                     CASE WHEN name = 'wait_seconds' THEN waited ELSE 0 END AS value
              FROM changes WHERE name IS NOT NULL) AS m
        GROUP BY 1, 2, 3, 4;
    END IF;
    RETURN NULL;
END $$;

-- TRUNCATE (a test database's flush) takes an exclusive lock on `jobs`, so nothing else is
-- counting meanwhile: every counter is zero afterwards, the DLQ's groups and the metrics'
-- (below) too.
CREATE OR REPLACE FUNCTION scheduler_count_truncate() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    DELETE FROM job_counts;
    DELETE FROM dlq_counts;
    DELETE FROM job_metrics;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_count_inserts AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_jobs();
CREATE OR REPLACE TRIGGER jobs_count_updates AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_jobs();
CREATE OR REPLACE TRIGGER jobs_count_deletes AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_jobs();
CREATE OR REPLACE TRIGGER jobs_count_truncates AFTER TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_truncate();

-- Count `jobs` from scratch: when the counters are created (migration 0006), or to repair
-- them by hand. The lock lets no change to `jobs` commit between the count and its use.
CREATE OR REPLACE FUNCTION scheduler_recount_jobs() RETURNS void
LANGUAGE plpgsql AS
$$ BEGIN
    LOCK TABLE jobs IN SHARE MODE;
    DELETE FROM job_counts;
    INSERT INTO job_counts (key, queue, n)
    SELECT scheduler_count_key(status, in_dlq), queue, count(*) FROM jobs GROUP BY 1, 2;
END $$;

-- Count the DLQ's groups from scratch (`dlq_counts`): when they are created (migration
-- 0020), or to repair them by hand. Reads the dead letters only (`jobs_dlq_idx`).
CREATE OR REPLACE FUNCTION scheduler_recount_dlq() RETURNS void
LANGUAGE plpgsql AS
$$ BEGIN
    LOCK TABLE jobs IN SHARE MODE;
    DELETE FROM dlq_counts;
    INSERT INTO dlq_counts (type, error_signature, last_error, bucket, n)
    SELECT type, error_signature, last_error, scheduler_quarter_hour(updated_at), count(*)
    FROM jobs WHERE in_dlq
    GROUP BY GROUPING SETS ((type, error_signature, last_error),
                            (error_signature, scheduler_quarter_hour(updated_at)));
END $$;

-- Whether a job that is still to finish depends on `upstream`: such a job is never deleted
-- by the pruner (its dependent would lose its `depends_on`, or the upstream it waits for).
CREATE OR REPLACE FUNCTION scheduler_waited_on(upstream uuid) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT EXISTS (SELECT 1 FROM job_dependencies dep JOIN jobs waiting ON waiting.id = dep.job_id
                  WHERE dep.depends_on_id = upstream
                    AND waiting.status NOT IN ('completed', 'cancelled')) $$;

-- Delete jobs with what hangs off them: their logs, attempts and dependency edges; the next
-- run of a recurring job keeps its place (its `previous_run_id` is cleared). One statement,
-- so the job counters' triggers count it once. Purging the DLQ and pruning both call it.
CREATE OR REPLACE FUNCTION scheduler_delete_jobs(
    ids uuid[], OUT deleted_jobs bigint, OUT deleted_attempts bigint, OUT deleted_logs bigint
)
LANGUAGE sql VOLATILE AS
$$ WITH logs AS (
       DELETE FROM job_logs WHERE job_id = ANY(ids) RETURNING 1
   ), attempts AS (
       DELETE FROM job_attempts WHERE job_id = ANY(ids) RETURNING 1
   ), edges AS (
       DELETE FROM job_dependencies WHERE job_id = ANY(ids) OR depends_on_id = ANY(ids)
   ), unlinked AS (
       UPDATE jobs SET previous_run_id = NULL
       WHERE previous_run_id = ANY(ids) AND NOT id = ANY(ids)
   ), deleted AS (
       DELETE FROM jobs WHERE id = ANY(ids) RETURNING 1
   )
   SELECT (SELECT count(*) FROM deleted), (SELECT count(*) FROM attempts),
          (SELECT count(*) FROM logs) $$;

-- Prometheus metrics (`jobs.metrics`, GET /metrics), kept like the job counters: in the
-- transaction of every change, appended by statement-level triggers, summed when read and
-- folded by the workers' `CountFold` unit. Every web process then answers the same figures
-- for every worker's work, with no per-process state to merge. A row is one observation
-- group: `name` a counter (`le` infinite, `total` 0) or a histogram (`le` the bucket's
-- upper bound, `total` the sum of the values), by job type, queue and `label` (an outcome).
CREATE TABLE IF NOT EXISTS job_metrics (
    name text NOT NULL,
    type text NOT NULL DEFAULT '',
    queue text NOT NULL DEFAULT '',
    label text NOT NULL DEFAULT '',
    le double precision NOT NULL DEFAULT 'Infinity',
    n bigint NOT NULL,
    total double precision NOT NULL DEFAULT 0
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- The histograms' bucket bounds in seconds: from a fast claim to an hour-long handler.
CREATE OR REPLACE FUNCTION scheduler_metric_buckets() RETURNS double precision[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT ARRAY[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
                3600]::double precision[] $$;

-- The smallest bucket bound that holds `seconds` (infinite above the last). `width_bucket`
-- counts the bounds at or below `seconds`: the bound is the last of them when `seconds` is
-- on it, else the next. One expression with no subquery, so the triggers that call it get
-- it inlined: with a subquery it was planned again at every firing, which was a third of a
-- one-job claim's round trip.
CREATE OR REPLACE FUNCTION scheduler_metric_le(seconds double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT coalesce(
       (scheduler_metric_buckets())[width_bucket(seconds, scheduler_metric_buckets())
                                    + (seconds <> ALL (scheduler_metric_buckets()))::integer],
       'Infinity') $$;

-- How long each closed attempt ran, by outcome (succeeded, failed, cancelled: a running
-- attempt an operator cancelled is closed as failed, and `scheduler_jobs_failed_total`,
-- the job's failures, does not count it). An attempt's row before and after is paired by a
-- grouping on its id, as in `scheduler_count_jobs`, which says why.
CREATE OR REPLACE FUNCTION scheduler_metric_attempts() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    INSERT INTO job_metrics (name, type, queue, label, le, n, total)
    SELECT 'run_seconds', j.type, j.queue, c.status,
           scheduler_metric_le(c.duration_ms / 1000.0), count(*), sum(c.duration_ms / 1000.0)
    FROM (
        SELECT s.job_id, min(s.outcome) FILTER (WHERE s.after) AS status,
               min(s.duration_ms) FILTER (WHERE s.after) AS duration_ms
        FROM (SELECT false AS after, id, job_id, status AS outcome, duration_ms, finished_at
              FROM old_rows
              UNION ALL
              SELECT true, id, job_id,
                     CASE WHEN error_type = 'Cancelled' THEN 'cancelled' ELSE status END,
                     duration_ms, finished_at
              FROM new_rows) AS s
        GROUP BY s.id, s.job_id
        HAVING bool_and(s.finished_at IS NULL) FILTER (WHERE NOT s.after)
           AND bool_and(s.finished_at IS NOT NULL) FILTER (WHERE s.after)
    ) AS c
    JOIN jobs AS j ON j.id = c.job_id
    GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER job_attempts_metric_updates AFTER UPDATE ON job_attempts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_metric_attempts();

-- Failed attempts per quarter of an hour of `finished_at` (the console's "failed attempts
-- per hour" chart, in any time zone, as `dlq_counts`' arrivals), kept like the job counters
-- by statement triggers on `job_attempts`, so the chart reads at most 96 rows a day
-- whatever the failure rate. Folded by `fold_failure_counts`, which drops what is older
-- than the chart shows.
CREATE TABLE IF NOT EXISTS failure_counts (
    bucket timestamptz NOT NULL,
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

CREATE OR REPLACE FUNCTION scheduler_count_failures() RETURNS trigger
LANGUAGE plpgsql AS
$$ BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM failure_counts;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO failure_counts (bucket, n)
        SELECT scheduler_quarter_hour(finished_at), count(*) FROM new_rows
        WHERE status = 'failed' AND finished_at IS NOT NULL GROUP BY 1;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO failure_counts (bucket, n)
        SELECT scheduler_quarter_hour(finished_at), -count(*) FROM old_rows
        WHERE status = 'failed' AND finished_at IS NOT NULL GROUP BY 1;
    ELSE
        INSERT INTO failure_counts (bucket, n)
        SELECT bucket, sum(n)
        FROM (SELECT scheduler_quarter_hour(finished_at) AS bucket, 1 AS n FROM new_rows
              WHERE status = 'failed' AND finished_at IS NOT NULL
              UNION ALL
              SELECT scheduler_quarter_hour(finished_at), -1 FROM old_rows
              WHERE status = 'failed' AND finished_at IS NOT NULL) AS moved
        GROUP BY bucket
        HAVING sum(n) <> 0;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER job_attempts_count_inserts AFTER INSERT ON job_attempts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_failures();
CREATE OR REPLACE TRIGGER job_attempts_count_updates AFTER UPDATE ON job_attempts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_failures();
CREATE OR REPLACE TRIGGER job_attempts_count_deletes AFTER DELETE ON job_attempts
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_failures();
CREATE OR REPLACE TRIGGER job_attempts_count_truncates AFTER TRUNCATE ON job_attempts
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_failures();

-- Count the failed attempts from scratch (`failure_counts`): when they are created
-- (migration 0024), or to repair them by hand. Reads the failed ones only
-- (`job_attempts_failed_idx`).
CREATE OR REPLACE FUNCTION scheduler_recount_failures() RETURNS void
LANGUAGE plpgsql AS
$$ BEGIN
    LOCK TABLE job_attempts IN SHARE MODE;
    DELETE FROM failure_counts;
    INSERT INTO failure_counts (bucket, n)
    SELECT scheduler_quarter_hour(finished_at), count(*) FROM job_attempts
    WHERE status = 'failed' AND finished_at IS NOT NULL GROUP BY 1;
END $$;

-- Starts a rate limit no longer counts in its own period, kept for the longest period a limit
-- can have (`queues.MAX_PERIOD_SECONDS`, a day), so that a longer period set later counts
-- them (`scheduler_limit_starts`): deleted past the period, as they were before migration
-- 0057, a limit whose period went from 1 s to an hour forgot the starts of the hour before,
-- and let as many start again at once. Per second, the latest start of the second standing for all
-- of them: a claim a second adds at most a row a second (as many claims as there are starts,
-- kept a day, grew with the rate), and a start is never counted later than it was made
-- (under a longer period, for less than a second more than its own time would be). No
-- foreign key: Django's flush truncates `job_limits` without a cascade (so `jobs.queues`
-- deletes a limit's rows when it creates or removes one).
CREATE TABLE IF NOT EXISTS job_limit_past_starts (
    limit_id bigint NOT NULL,
    started_second timestamptz NOT NULL,
    last_started_at timestamptz NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (limit_id, started_second)
);

-- The starts counted against limit `limit_id` after `since`: those its claims recorded
-- (`job_limit_starts`) and those folded past its period (`job_limit_past_starts`). The rule
-- of the claim (`scheduler_limit_room`) and of what the API and console show as its use.
CREATE OR REPLACE FUNCTION scheduler_limit_starts(limit_id bigint, since timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS
$$ SELECT (SELECT coalesce(sum(s.n), 0) FROM job_limit_starts s
           WHERE s.limit_id = $1 AND s.started_at > since)
        + (SELECT coalesce(sum(p.n), 0) FROM job_limit_past_starts p
           WHERE p.limit_id = $1 AND p.started_second > since - interval '1 second'
             AND p.last_started_at > since)::bigint $$;

-- Room under each of `limit_ids` (`job_limits`): how many more of its jobs may start now,
-- and the clock the claim records their starts at. Exact under concurrent claims: each
-- limit's transaction-level advisory lock is taken first (in id order, so two claims never
-- wait on each other in a circle), and the counts are made after it by statements of their
-- own. In READ COMMITTED each statement of a VOLATILE function takes a new snapshot, so the
-- counts see every claim committed by the lock's previous holders (a claim holds the lock
-- until its transaction ends), and the clock is later than every start they recorded: the
-- starts of one limit are recorded in lock order, and at most `max_starts` fall in any
-- window of `period_seconds`. A job under two limits is ranked against each; the room it
-- takes under one is not given back when the other holds it back (never over, sometimes
-- under). Starts older than the period are folded here, under the lock, into
-- `job_limit_past_starts`, and those older than a day deleted.
-- The clock is read after the count of running jobs: a completion that committed before
-- the count, freeing room, then finished before the starts it let in. Read before it, the
-- attempts' times showed 7 running at once under a limit of 4, for a few milliseconds.
CREATE OR REPLACE FUNCTION scheduler_limit_room(limit_ids bigint[])
RETURNS TABLE (limit_id bigint, room bigint, at timestamptz)
LANGUAGE plpgsql VOLATILE AS
$$
DECLARE
    l record;
    used bigint;
    since timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('scheduler_limit'), ids.id::integer)
    FROM (SELECT DISTINCT id FROM unnest(limit_ids) AS id ORDER BY id) AS ids;
    FOR l IN SELECT * FROM job_limits WHERE id = ANY(limit_ids) ORDER BY id LOOP
        limit_id := l.id;
        room := NULL;
        IF l.max_running IS NOT NULL THEN
            SELECT count(*) INTO used FROM jobs j
            WHERE j.status = 'processing'
              AND CASE l.scope WHEN 'type' THEN j.type = l.name ELSE j.queue = l.name END;
            room := l.max_running - used;
        END IF;
        at := clock_timestamp();
        IF l.max_starts IS NOT NULL THEN
            since := at - l.period_seconds * interval '1 second';
            WITH aged AS (
                DELETE FROM job_limit_starts s WHERE s.limit_id = l.id AND s.started_at <= since
                RETURNING s.started_at, s.n
            )
            INSERT INTO job_limit_past_starts AS p (limit_id, started_second, last_started_at, n)
            SELECT l.id, date_trunc('second', a.started_at), max(a.started_at), sum(a.n)
            FROM aged a WHERE a.started_at > at - interval '1 day'
            GROUP BY 2 HAVING sum(a.n) > 0
            ON CONFLICT ON CONSTRAINT job_limit_past_starts_pkey DO UPDATE
            SET n = p.n + excluded.n,
                last_started_at = greatest(p.last_started_at, excluded.last_started_at);
            IF FOUND THEN
                DELETE FROM job_limit_past_starts p
                WHERE p.limit_id = l.id AND p.started_second <= at - interval '1 day 1 second';
            END IF;
            used := scheduler_limit_starts(l.id, since);
            room := least(room, l.max_starts - used);
        END IF;
        room := greatest(room, 0);
        RETURN NEXT;
    END LOOP;
END
$$;

-- The limits a job of `job_type` in `job_queue` is under, and whether each counts starts.
CREATE OR REPLACE FUNCTION scheduler_limits_of(job_type text, job_queue text)
RETURNS TABLE (limit_id bigint, counts_starts boolean)
LANGUAGE sql STABLE AS
$$ SELECT id, max_starts IS NOT NULL FROM job_limits
   WHERE (scope = 'type' AND name = job_type) OR (scope = 'queue' AND name = job_queue) $$;

-- The ids a claim is to take, as given (`claim_jobs`). PL/pgSQL, which PostgreSQL never
-- inlines, so the planner cannot see how many there are: a plan for one id is then
-- estimated to cost what a plan for any number does, and PostgreSQL keeps the generic
-- plan of the prepared claim once it has planned it for five calls. Given the array
-- itself, it estimated a claim of one job cheaper than the generic plan (which assumes
-- ten) by more than it reckons a planning costs, and planned every such claim anew:
-- 0.6-1.2 ms for a statement that runs in 0.3-0.5 ms, on an idle worker taking one job at
-- a time.
CREATE OR REPLACE FUNCTION scheduler_claim_ids(ids uuid[]) RETURNS uuid[]
LANGUAGE plpgsql STABLE AS
$$ BEGIN RETURN ids; END $$;

-- An array a batch statement unnests, as given (`complete_jobs`), for the reason of
-- `scheduler_claim_ids`: the planner is not to see how long it is, so that a completion of
-- one job is estimated to cost what one of any number does and PostgreSQL keeps one plan
-- for it. It planned each such completion anew: 0.8 ms, for one that runs in 0.7 ms, on a
-- worker finishing one job at a time. VOLATILE, unlike `scheduler_claim_ids`, whose result
-- filters an index scan: the planner evaluates a STABLE function of constants to estimate
-- how many rows `unnest` returns.
CREATE OR REPLACE FUNCTION scheduler_unsized(items anyarray) RETURNS anyarray
LANGUAGE plpgsql VOLATILE AS
$$ BEGIN RETURN items; END $$;

-- A claim's admission under the limits (`claim_jobs`): of `due_ids`, the claim's jobs in
-- claim order (locked by it), the ones their limits hold back, and the clock the starts of
-- the others are counted at (`scheduler_limit_room`), recorded here in `job_limit_starts`
-- for the limits that count starts. A job is ranked against each of its limits, most
-- urgent first. With no limit anywhere: no row, no lock, no count; with limits, but none on
-- these jobs: no held-back job, no clock. A function rather than CTEs of the claim because
-- PostgreSQL starts every node of a statement's plan at each call, run or not: the limits'
-- window, sorts, joins and INSERT (which opens `job_limit_starts` and its index) were
-- about an eighth of the claiming backend's CPU with no limit defined (`perf record` of
-- it), and 0.1-0.36 ms of a claim of one job on an idle worker.
CREATE OR REPLACE FUNCTION scheduler_claim_admission(due_ids uuid[])
RETURNS TABLE (held_back uuid[], started_at timestamptz)
LANGUAGE plpgsql VOLATILE AS
$$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM job_limits) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH limited AS (
        SELECT d.id, l.limit_id, l.counts_starts,
               row_number() OVER (PARTITION BY l.limit_id ORDER BY d.n) AS place
        FROM unnest(due_ids) WITH ORDINALITY AS d(id, n)
        JOIN jobs j ON j.id = d.id
        CROSS JOIN LATERAL scheduler_limits_of(j.type, j.queue) AS l
    ), room AS (
        SELECT r.* FROM scheduler_limit_room(ARRAY(SELECT DISTINCT limit_id FROM limited)) AS r
        WHERE EXISTS (SELECT 1 FROM limited)
    ), held AS (
        SELECT limited.id FROM limited JOIN room USING (limit_id) WHERE limited.place > room.room
    ), counted AS (
        INSERT INTO job_limit_starts (limit_id, started_at, n)
        SELECT limited.limit_id, room.at, count(*)
        FROM limited JOIN room USING (limit_id)
        WHERE limited.counts_starts AND limited.id NOT IN (SELECT held.id FROM held)
        GROUP BY limited.limit_id, room.at
    )
    SELECT ARRAY(SELECT DISTINCT held.id FROM held), (SELECT max(room.at) FROM room);
END
$$;

-- A bearer token's attempt from address `client` (`jobs.api.auth`), `failed` when no usable
-- token has its hash: the failures of the client's current period that the attempt comes
-- after, the attempt counted when it failed with fewer than `failure_limit` before it (NULL
-- for no limit: nothing counted). The attempts of one address are judged one after
-- another, in the order they reach its transaction-level advisory lock, whatever their
-- tokens: exclusive for a failure, shared for a good token, which writes nothing, so that a
-- busy client's requests do not wait on each other. The count is read after the lock by a
-- statement of its own, which in a VOLATILE function sees every failure the lock's previous
-- holders committed (a failure holds it until its transaction ends). Read by the token's
-- lookup, the count missed the failures still being added: of a burst of guesses sent at
-- once, more than the limit were checked, and a good token among them was answered as if
-- it had come first. The period starts at the first failure; a failure then deletes the
-- ended periods of other addresses (the table holds little more than the current ones),
-- skipping rows another failure holds: deleting first, two failures from addresses whose
-- periods had ended deleted each other's row, then waited on each other (a deadlock).
CREATE OR REPLACE FUNCTION scheduler_token_attempt(
    client text, failed boolean, failure_limit integer, period_seconds double precision
) RETURNS integer
LANGUAGE plpgsql VOLATILE AS
$$
DECLARE
    prior integer;
BEGIN
    IF failure_limit IS NULL THEN
        RETURN NULL;
    END IF;
    IF failed THEN
        PERFORM pg_advisory_xact_lock(hashtext('api_token_failures'), hashtext(client));
    ELSE
        PERFORM pg_advisory_xact_lock_shared(hashtext('api_token_failures'), hashtext(client));
    END IF;
    SELECT coalesce(max(f.failures), 0) INTO prior FROM api_token_failures f
    WHERE f.address = client AND f.period_ends > now();
    IF failed AND prior < failure_limit THEN
        INSERT INTO api_token_failures AS f (address, failures, period_ends)
        VALUES (client, 1, now() + make_interval(secs => period_seconds))
        ON CONFLICT (address) DO UPDATE SET
            failures = CASE WHEN f.period_ends > now() THEN f.failures + 1 ELSE 1 END,
            period_ends = CASE WHEN f.period_ends > now() THEN f.period_ends
                               ELSE excluded.period_ends END;
        DELETE FROM api_token_failures f WHERE f.address IN (
            SELECT e.address FROM api_token_failures e WHERE e.period_ends <= now()
            FOR UPDATE SKIP LOCKED
        );
    END IF;
    RETURN prior;
END
$$;
