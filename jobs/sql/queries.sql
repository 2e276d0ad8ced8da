-- The hot and guarded SQL of the job state machine. Every transition is one statement whose
-- WHERE clause names the state it expects: zero rows back means the transition lost a race
-- and nothing changed. Parameters are psycopg named placeholders. The rules these statements
-- share are SQL functions in `schema.sql`: the virtual deadline, the job object, closing an
-- attempt. Only the core's modules run them (`jobs.state`, `jobs.stats`).

-- name: claim_jobs
-- Claim up to `limit` runnable jobs among `job_ids` (the worker's heap order), most urgent
-- first. Each claim opens an attempt whose id is the fencing token of the claim. Returns
-- the token and the API job object as text, which its `job.started` event reuses.
-- The ids are always given (`jobs.state.claim` reads them first when its caller has none),
-- so one plan fits every call, a look-up of each id in the primary key, which PostgreSQL
-- runs from the eleventh call on a connection without planning again (psycopg prepares
-- the statement at its sixth call; `scheduler_claim_ids` says why the ids go through a
-- function). With `job_ids` optional (`IS NULL OR id = ANY`) it planned every call anew,
-- 0.6-1.2 ms, longer than the claim itself (pg_prepared_statements: 0 generic plans in 25
-- calls; `EXPLAIN` of a claim of one job: planning 1.2-1.8 ms).
-- Only jobs of the worker's queues (`queues`, NULL: all; never `other_queues`) and of no
-- paused queue: a pause is exact from its commit on, whatever a worker holds in memory.
-- Jobs under a limit (`job_limits`) are claimed only up to the room each limit has left
-- (`scheduler_claim_admission`, most urgent first); the others stay pending, locked until
-- this transaction ends. With no limit on any job of the batch, that costs no lock and no
-- count.
-- Runnable is written as the counter a job is counted under (`scheduler_count_key`: its
-- status, `dlq` in the dead-letter queue), an expression no index covers: so the statement
-- neither implies the predicate of `jobs_claimable_idx` nor offers another index a
-- condition, and the planner looks each id up by primary key whatever its statistics say.
-- Written as the status and `NOT in_dlq`, a plan made while few jobs waited walked the
-- claimable index in claim order filtering for the ids, and kept walking once 50,000 more
-- urgent jobs of another queue arrived: 53-57 ms a claim of one job instead of 1.1-1.7,
-- until the next ANALYZE of `jobs`. Other queues, paused ones, later jobs and the jobs
-- other workers are claiming all sort among a worker's own.
WITH due AS (
    SELECT id, type, queue, virtual_deadline, created_at
    FROM jobs
    WHERE scheduler_count_key(status, in_dlq) IN ('pending', 'failed')
      AND pending_dependencies = 0
      AND run_at <= now()
      AND id = ANY(scheduler_claim_ids(%(job_ids)s::uuid[]))
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
      AND queue <> ALL (%(other_queues)s::text[])
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = jobs.queue AND q.paused)
    ORDER BY virtual_deadline, created_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), admission AS (
    SELECT held_back, started_at
    FROM scheduler_claim_admission(ARRAY(SELECT id FROM due ORDER BY virtual_deadline, created_at, id))
), claimed AS (
    UPDATE jobs AS j
    SET status = 'processing',
        attempt_count = j.attempt_count + 1,
        -- Under a limit, the clock its starts are counted at.
        started_at = coalesce((SELECT started_at FROM admission), now()),
        updated_at = now(),
        next_retry_at = NULL,
        worker_id = %(worker_id)s,
        current_attempt_id = scheduler_uuid7()
    FROM due
    WHERE j.id = due.id AND NOT j.id = ANY(coalesce((SELECT held_back FROM admission), '{}'))
    RETURNING j.*
), opened AS (
    INSERT INTO job_attempts (id, job_id, attempt_number, status, started_at, worker_id)
    SELECT current_attempt_id, id, attempt_count, 'running', started_at, worker_id
    FROM claimed
)
SELECT c.id, c.current_attempt_id, scheduler_job_object(ROW(c.*)::jobs, up.ids)::text AS job
FROM claimed c CROSS JOIN LATERAL scheduler_upstream_ids(c.id) AS up
ORDER BY c.virtual_deadline, c.created_at, c.id;

-- name: complete_jobs
-- Finish a batch of attempts as succeeded. Only attempts that still hold their claim win.
-- Their dependents are released in the same statement (`scheduler_release_dependents`);
-- recurring jobs get their next run by the next statements of the same transaction
-- (`jobs.state.complete`). Two kinds of row: each completed job, with the API job object as
-- text, which its event reuses, and what a recurrence needs (`scheduled_at` for recurring
-- jobs only: reading a time back costs the worker more than the rest of the row), and the
-- attempt that completed it; then each dependent that became runnable, with what wakes the
-- workers (`job` NULL).
-- Only the winning attempts are closed: a batch can hold a lost attempt of a job beside the
-- live one (a worker cut off, its job rescued and claimed again by the same worker, reports
-- both at once), and the lost one keeps what its rescue recorded.
-- `results` is one JSON array (one encoding per batch rather than one per job). One plan is
-- kept from the eleventh call on a connection, also for a worker that finishes one job at a
-- time (`scheduler_unsized`).
WITH outcome AS (
    SELECT o.job_id, o.attempt_id, r.result, o.finished_at
    FROM unnest(scheduler_unsized(%(job_ids)s::uuid[]),
                scheduler_unsized(%(attempt_ids)s::uuid[]),
                scheduler_unsized(%(finished_at)s::timestamptz[]))
         WITH ORDINALITY AS o(job_id, attempt_id, finished_at, n)
    JOIN jsonb_array_elements(%(results)s::jsonb) WITH ORDINALITY AS r(result, n) USING (n)
), done AS (
    UPDATE jobs AS j
    SET status = 'completed',
        completed_at = o.finished_at,
        updated_at = now(),
        result = o.result,
        last_error = NULL,
        current_attempt_id = NULL
    FROM outcome o
    -- The fencing token alone guards: every transition out of `processing` clears it. Named
    -- too, the status let the planner reach `jobs` through the partial indexes of processing
    -- rows, whose number it knows from the last ANALYZE: estimated at one row (taken while
    -- the workers were idle), that scan became the outer side of a nested loop running
    -- every outcome against each row, quadratic in the batch (13,000 outcomes: 31 s, the
    -- worker falling further behind with each larger batch). Without it, each outcome looks
    -- its job up by primary key.
    WHERE j.id = o.job_id AND j.current_attempt_id = o.attempt_id
    RETURNING j AS job, o.attempt_id
), closed AS (
    SELECT scheduler_close_attempts(array_agg(attempt_id), array_agg((job).completed_at),
                                    'succeeded', NULL::text[], NULL::text[], NULL::text[])
    FROM done
), counted AS (
    UPDATE workers SET jobs_done = jobs_done + (SELECT count(*) FROM done)
    WHERE id = %(worker_id)s
), released AS (
    SELECT * FROM scheduler_release_dependents(ARRAY(SELECT (job).id FROM done))
)
SELECT (d.job).id, (d.job).recur_interval, (d.job).schedule_id,
       CASE WHEN (d.job).recur_interval IS NOT NULL OR (d.job).schedule_id IS NOT NULL
            THEN (d.job).scheduled_at END AS scheduled_at,
       scheduler_job_object(d.job, up.ids)::text AS job, d.attempt_id,
       NULL::text AS type, NULL::integer AS priority, NULL::timestamptz AS run_at,
       NULL::timestamptz AS created_at
FROM done d CROSS JOIN LATERAL scheduler_upstream_ids((d.job).id) AS up CROSS JOIN closed
UNION ALL
SELECT r.id, NULL, NULL, NULL, NULL, NULL, r.type, r.priority, r.run_at, r.created_at
FROM released r;

-- name: schedule_next_runs
-- The next run of each recurring job in `job_ids`, at the matching `run_at` (computed by its
-- recurrence, `jobs.recurrence`). Once only: `previous_run_id` is unique, and so is a
-- schedule's slot, so a second completion report of the same run creates nothing.
-- A run of a schedule is what its schedule says (`create_schedule_runs`), not a copy of the
-- run before: a dead letter's payload edited for its retry (`edit_dlq_payload`) became the
-- series' until a pause and resume went back to the schedule's.
INSERT INTO jobs AS new (id, type, queue, payload, priority, status, attempt_count, max_retries,
                         scheduled_at, recur_interval, in_dlq, created_at, updated_at,
                         run_at, virtual_deadline, pending_dependencies, previous_run_id,
                         schedule_id)
SELECT scheduler_uuid7(), w.type, w.queue, w.payload, w.priority, 'pending', 0, w.max_retries,
       n.run_at, j.recur_interval, false, now(), now(),
       n.run_at, scheduler_virtual_deadline(w.priority, n.run_at), 0, j.id, j.schedule_id
FROM unnest(%(job_ids)s::uuid[], %(run_at)s::timestamptz[]) AS n(previous_id, run_at)
JOIN jobs j ON j.id = n.previous_id
LEFT JOIN schedules s ON s.id = j.schedule_id
CROSS JOIN LATERAL (
    SELECT coalesce(s.type, j.type) AS type, coalesce(s.queue, j.queue) AS queue,
           CASE WHEN s.id IS NULL THEN j.payload ELSE s.payload END AS payload,
           coalesce(s.priority, j.priority) AS priority,
           coalesce(s.max_retries, j.max_retries) AS max_retries
) AS w
ON CONFLICT DO NOTHING
RETURNING new.id, new.type, new.priority, new.run_at, new.created_at,
          scheduler_job_object(new)::text AS job;

-- name: lock_live_schedules
-- The schedules among `schedule_ids` that are not paused, share-locked until the caller's
-- transaction ends: a pause (`set_schedule_paused`) waits for the run it would miss.
SELECT id, cron, timezone FROM schedules
WHERE id = ANY(%(schedule_ids)s::uuid[]) AND NOT paused
FOR SHARE;

-- name: create_schedule_runs
-- A run of each of `schedule_ids` at the matching slot `run_at` (a new or resumed schedule),
-- unless it is paused or a run of it is waiting or running; a slot is created once.
INSERT INTO jobs AS new (id, type, queue, payload, priority, status, attempt_count,
                         max_retries, scheduled_at, in_dlq, created_at, updated_at, run_at,
                         virtual_deadline, pending_dependencies, schedule_id)
SELECT scheduler_uuid7(), s.type, s.queue, s.payload, s.priority, 'pending', 0, s.max_retries,
       n.run_at, false, now(), now(), n.run_at,
       scheduler_virtual_deadline(s.priority, n.run_at), 0, s.id
FROM unnest(%(schedule_ids)s::uuid[], %(run_at)s::timestamptz[]) AS n(schedule_id, run_at)
JOIN schedules s ON s.id = n.schedule_id
WHERE NOT s.paused
  AND NOT EXISTS (SELECT 1 FROM jobs live
                  WHERE live.schedule_id = s.id AND NOT live.in_dlq
                    AND live.status IN ('pending', 'processing', 'failed'))
ON CONFLICT DO NOTHING
RETURNING new.id, new.type, new.priority, new.run_at, new.created_at,
          scheduler_job_object(new)::text AS job;

-- name: set_schedule_paused
-- Pause or resume a schedule (locked by `lock_schedule` first).
UPDATE schedules SET paused = %(paused)s, updated_at = now()
WHERE id = %(schedule_id)s;

-- name: cancel_schedule_runs
-- Cancel the runs of a paused or deleted schedule that wait: for their slot, or for a retry
-- (one left waiting for its retry ran while the schedule was paused, or once it was gone).
-- A run in the DLQ stays there, to be retried or purged as any dead letter.
UPDATE jobs AS j
SET status = 'cancelled',
    cancelled_at = now(),
    updated_at = now(),
    next_retry_at = NULL,
    last_error = %(reason)s
WHERE j.schedule_id = %(schedule_id)s
  AND (j.status = 'pending' OR (j.status = 'failed' AND NOT j.in_dlq))
RETURNING scheduler_job_object(j)::text AS job;

-- name: take_schedule_turn
-- A schedule's pause, resume or deletion waits here, before it locks any row, until the
-- one before it ended (a transaction-level advisory lock on the schedule's id). Its rows
-- alone did not order them: a pause whose `lock_schedule` found no run waited for the
-- row while a resume created one, then held the row without that run; a second pause,
-- holding the run and waiting for the row, deadlocked with its cancel of the run (one
-- operator got a 503). No other transition takes it, so it closes no circle with them.
SELECT pg_advisory_xact_lock(hashtext('scheduler_schedule'),
                             hashtext(%(schedule_id)s::uuid::text)) IS NULL AS waited;

-- name: lock_schedule
-- A schedule's row, locked before a pause, resume or deletion (`take_schedule_turn`
-- first): a completion of one of its runs (which reads it FOR SHARE to create the next)
-- waits, then finds what they left.
-- Its runs that wait or run are locked first, in id order, as a completion or a cancel
-- locks them before it reads the schedule: holding the schedule while waiting for a run
-- that a completion or cancel held, and that waited for the schedule, was a deadlock (the
-- operator's pause or delete refused, or the worker's completion rolled back). Now the
-- action waits for them and then sees the run they created.
WITH runs AS (
    SELECT id FROM jobs
    WHERE schedule_id = %(schedule_id)s AND NOT in_dlq
      AND status IN ('pending', 'processing', 'failed')
    ORDER BY id
    FOR NO KEY UPDATE
)
SELECT type, cron, timezone, paused FROM schedules
WHERE id = %(schedule_id)s AND (SELECT count(*) FROM runs) >= 0
FOR UPDATE;

-- name: delete_schedule
-- Delete a locked schedule; its runs stay, no longer naming it.
WITH detached AS (
    UPDATE jobs SET schedule_id = NULL WHERE schedule_id = %(schedule_id)s
)
DELETE FROM schedules WHERE id = %(schedule_id)s;

-- name: fail_jobs
-- Close a batch of failed attempts, each with its own error. A job with attempts left waits
-- for its `retry_at`; one without enters the dead-letter queue. Only attempts that still hold
-- their claim win: the fencing token alone guards, as in `complete_jobs` (and for the same
-- reason: each outcome looks its job up by primary key). Each failed job's object as text,
-- which its events reuse. One plan is kept, as for `complete_jobs` (`scheduler_unsized`).
WITH outcome AS (
    SELECT *
    FROM unnest(scheduler_unsized(%(job_ids)s::uuid[]),
                scheduler_unsized(%(attempt_ids)s::uuid[]),
                %(error_types)s::text[], %(error_messages)s::text[], %(stack_traces)s::text[],
                %(retry_at)s::timestamptz[], %(finished_at)s::timestamptz[])
         AS o(job_id, attempt_id, error_type, error_message, stack_trace, retry_at,
              finished_at)
), failed AS (
    UPDATE jobs AS j
    SET status = 'failed',
        in_dlq = j.attempt_count >= j.max_retries,
        error_signature = CASE WHEN j.attempt_count >= j.max_retries
                               THEN scheduler_error_signature(j.type, o.error_type,
                                                              o.error_message) END,
        next_retry_at = CASE WHEN j.attempt_count >= j.max_retries THEN NULL
                             ELSE o.retry_at END,
        run_at = CASE WHEN j.attempt_count >= j.max_retries THEN j.run_at ELSE o.retry_at END,
        virtual_deadline = CASE WHEN j.attempt_count >= j.max_retries THEN j.virtual_deadline
                                ELSE scheduler_virtual_deadline(j.priority, o.retry_at) END,
        last_error = o.error_message,
        updated_at = now(),
        current_attempt_id = NULL
    FROM outcome o
    WHERE j.id = o.job_id AND j.current_attempt_id = o.attempt_id
    RETURNING scheduler_job_object(j)::text AS job, o.*
), closed AS (
    SELECT scheduler_close_attempts(array_agg(attempt_id), array_agg(finished_at), 'failed',
                                    array_agg(error_type), array_agg(error_message),
                                    array_agg(stack_trace))
    FROM failed
)
SELECT failed.attempt_id, failed.job FROM failed CROSS JOIN closed;

-- name: hand_back_jobs
-- Undo the claims of jobs their worker never started (they waited for a thread past the
-- prefetch's bound, `worker.processor`): each job pending again as before its claim, with
-- its place in the claim order, its attempt deleted (it never ran, so it spends none of the
-- job's retries and has no log line) and the start time of its previous attempt, if any.
-- Fenced by the attempt id like every outcome. What wakes the workers, and the job object
-- as text, which its event reuses. A start the claim counted under a rate limit is given
-- back: the job never started, and its count would keep idle workers next door waiting out
-- the period. The claim's row of each limit is that limit's latest at or before the
-- attempt's start (the claim held the limit's lock until it committed, and a claim under
-- several limits starts its jobs at the latest of their clocks).
WITH returned AS (
    UPDATE jobs AS j
    SET status = 'pending',
        attempt_count = j.attempt_count - 1,
        started_at = (SELECT max(a.started_at) FROM job_attempts a
                      WHERE a.job_id = j.id AND a.id <> h.attempt_id),
        updated_at = now(),
        worker_id = NULL,
        current_attempt_id = NULL
    FROM unnest(%(job_ids)s::uuid[], %(attempt_ids)s::uuid[]) AS h(job_id, attempt_id)
    WHERE j.id = h.job_id AND j.current_attempt_id = h.attempt_id
    RETURNING j.id, j.type, j.queue, j.priority, j.run_at, j.created_at, h.attempt_id,
              scheduler_job_object(j)::text AS job
), removed AS (
    DELETE FROM job_attempts WHERE id IN (SELECT attempt_id FROM returned)
    RETURNING job_id, started_at
), unstarted AS (
    SELECT l.limit_id, r.started_at, count(*) AS n
    FROM removed r JOIN returned j ON j.id = r.job_id
    CROSS JOIN LATERAL scheduler_limits_of(j.type, j.queue) AS l
    WHERE l.counts_starts
    GROUP BY l.limit_id, r.started_at
), given_back AS (
    UPDATE job_limit_starts s SET n = s.n - u.n
    FROM unstarted u
    WHERE s.limit_id = u.limit_id AND s.n >= u.n
      AND s.started_at = (SELECT max(c.started_at) FROM job_limit_starts c
                          WHERE c.limit_id = u.limit_id AND c.started_at <= u.started_at)
)
SELECT id, type, priority, run_at, created_at, attempt_id, job FROM returned;

-- name: cancel_job
-- Cancel those of `job_ids` that have not finished. A running attempt is closed as failed
-- and loses its claim, so the worker's late outcome is refused. A claimed job is
-- `processing` whether a thread of its worker took it or it still waits for one, which only
-- its worker knows: the one that waited is then said to have never started
-- (`note_unstarted_cancels`).
WITH cancelled AS (
    UPDATE jobs AS j
    SET status = 'cancelled',
        cancelled_at = now(),
        updated_at = now(),
        next_retry_at = NULL,
        current_attempt_id = NULL,
        last_error = coalesce(%(reason)s, j.last_error)
    FROM (SELECT id, current_attempt_id AS attempt_id FROM jobs
          WHERE id = ANY(%(job_ids)s::uuid[]) FOR UPDATE) AS prior
    WHERE j.id = prior.id
      AND (j.status IN ('pending', 'processing') OR (j.status = 'failed' AND NOT j.in_dlq))
    RETURNING scheduler_job_object(j)::text AS job, prior.attempt_id AS cancelled_attempt_id
), closed AS (
    SELECT scheduler_close_attempts(array_agg(cancelled_attempt_id), array_agg(now()),
                                    'failed', array_agg('Cancelled'::text),
                                    array_agg('Cancelled while running'::text), NULL::text[])
    FROM cancelled
    WHERE cancelled_attempt_id IS NOT NULL
)
SELECT cancelled.* FROM cancelled CROSS JOIN closed;

-- name: note_unstarted_cancels
-- Say of attempts closed by a cancel (`cancel_job`, error type `Cancelled`) that their
-- handler never started: their job waited in its worker for a thread, and was dropped
-- there. The worker that held each claim presents it (job id, attempt id), as its outcome
-- would; an attempt closed otherwise (its job rescued meanwhile) keeps what it says. Its
-- times stay: it was claimed then, and held until the cancel.
UPDATE job_attempts AS a
SET error_message = 'Cancelled before it started'
FROM unnest(%(job_ids)s::uuid[], %(attempt_ids)s::uuid[]) AS u(job_id, attempt_id)
WHERE a.id = u.attempt_id AND a.job_id = u.job_id AND a.error_type = 'Cancelled'
RETURNING a.id;

-- name: cancel_dependents
-- Cancel every not-yet-started job downstream of `job_ids`, naming the upstream job and
-- what became of it: `verb` for the jobs of `job_ids`, cancelled for those this cancels.
WITH RECURSIVE downstream AS (
    SELECT dep.job_id, dep.depends_on_id AS upstream_id
    FROM job_dependencies dep
    WHERE dep.depends_on_id = ANY(%(job_ids)s::uuid[])
    UNION
    SELECT dep.job_id, dep.depends_on_id
    FROM job_dependencies dep
    JOIN downstream ON dep.depends_on_id = downstream.job_id
), cancelled AS (
    UPDATE jobs AS j
    SET status = 'cancelled',
        cancelled_at = now(),
        updated_at = now(),
        next_retry_at = NULL,
        last_error = 'Upstream job ' || downstream.upstream_id || ' '
                     || CASE WHEN downstream.upstream_id = ANY(%(job_ids)s::uuid[])
                             THEN %(verb)s ELSE 'was cancelled' END
    FROM downstream
    WHERE j.id = downstream.job_id AND j.status = 'pending'
    RETURNING scheduler_job_object(j)::text AS job
)
SELECT * FROM cancelled;

-- name: retry_dlq_job
-- Give a dead-letter job a fresh set of attempts, due now. Its attempt history stays.
UPDATE jobs AS j
SET status = 'pending',
    in_dlq = false,
    attempt_count = 0,
    next_retry_at = NULL,
    completed_at = NULL,
    last_error = NULL,
    worker_id = NULL,
    run_at = now(),
    virtual_deadline = scheduler_virtual_deadline(j.priority, now()),
    updated_at = now()
WHERE j.id = ANY(%(job_ids)s::uuid[]) AND j.status = 'failed' AND j.in_dlq
RETURNING j.id, j.type, j.priority, j.run_at, j.created_at,
          scheduler_job_object(j)::text AS job;

-- name: edit_dlq_payload
-- Replace a dead letter's payload (validated by the caller); returns the payload it had.
UPDATE jobs AS j
SET payload = %(payload)s, updated_at = now()
FROM (SELECT id, payload FROM jobs WHERE id = %(job_id)s FOR UPDATE) AS prior
WHERE j.id = prior.id AND j.status = 'failed' AND j.in_dlq
RETURNING prior.payload::text AS before;

-- name: purge_dlq_jobs
-- Delete dead-letter jobs with their attempts, logs and edges; all of them when `job_ids`
-- is NULL. Dependents are cancelled first by the caller.
SELECT deleted_jobs AS purged
FROM scheduler_delete_jobs(ARRAY(
    SELECT id FROM jobs
    WHERE status = 'failed' AND in_dlq
      AND (%(job_ids)s::uuid[] IS NULL OR id = ANY(%(job_ids)s::uuid[]))
    FOR UPDATE));

-- name: rescue_lost_jobs
-- Take back jobs whose worker is gone: those of workers that missed their heartbeat past
-- `heartbeat_before` (marked dead here), those stuck in processing since before
-- `stuck_before` that no worker vouched for since (`lost_claims`), and those of `worker_id`
-- when it releases its jobs on a forced shutdown (`requeue`).
-- The lost attempt is recorded as failed. A dead or stuck worker's counts, and a job with no
-- attempts left enters the DLQ: a crash may be the job's own doing (its memory, a native
-- library), and must not kill worker after worker. A released one is recorded but not
-- counted (the next attempt takes its number), as Sidekiq puts back what a shutdown cut
-- short: a stop out of grace, a second signal, a failed thread of the worker are none of
-- the job's doing, and a deploy must not bring a job closer to the DLQ. Either way the
-- lost attempt's id is no longer the job's, so its late outcome is refused.
-- Both clocks count only from `watched_since` (when the caller last regained the database)
-- and from the server's start: while the database was down or cut off for everyone nobody
-- could beat or report, and a worker back with finished outcomes is neither dead nor stuck.
WITH sight AS (
    SELECT greatest(%(watched_since)s::timestamptz, pg_postmaster_start_time()) AS since
), dead_workers AS (
    UPDATE workers
    SET status = 'dead', stopped_at = now()
    WHERE status IN ('running', 'stopping') AND heartbeat_at < %(heartbeat_before)s
      AND (SELECT since FROM sight) < %(heartbeat_before)s
    RETURNING id
), lost AS (
    SELECT id, current_attempt_id AS attempt_id
    FROM jobs
    WHERE status = 'processing'
      AND ((started_at < %(stuck_before)s AND (SELECT since FROM sight) < %(stuck_before)s
            AND (heartbeat_at IS NULL OR heartbeat_at < %(stuck_before)s))
           OR worker_id IN (SELECT id FROM dead_workers)
           OR worker_id = %(worker_id)s)
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE jobs AS j
    SET status = CASE WHEN %(requeue)s OR j.attempt_count < j.max_retries
                      THEN 'pending' ELSE 'failed' END,
        in_dlq = NOT %(requeue)s AND j.attempt_count >= j.max_retries,
        attempt_count = CASE WHEN %(requeue)s THEN j.attempt_count - 1 ELSE j.attempt_count END,
        error_signature = CASE WHEN NOT %(requeue)s AND j.attempt_count >= j.max_retries
                               THEN scheduler_error_signature(j.type, 'WorkerLost', %(reason)s)
                          END,
        run_at = now(),
        virtual_deadline = scheduler_virtual_deadline(j.priority, now()),
        last_error = %(reason)s,
        updated_at = now(),
        worker_id = NULL,
        current_attempt_id = NULL
    FROM lost
    WHERE j.id = lost.id
    RETURNING j.id, j.type, j.priority, j.run_at, j.created_at, j.status,
              scheduler_job_object(j)::text AS job, lost.attempt_id AS lost_attempt_id
), closed AS (
    SELECT scheduler_close_attempts(array_agg(lost_attempt_id), array_agg(now()),
                                    'failed', array_agg('WorkerLost'::text),
                                    array_agg(%(reason)s::text), NULL::text[])
    FROM rescued
)
SELECT rescued.* FROM rescued CROSS JOIN closed;

-- name: append_logs
-- Write log lines of running attempts, each line naming its job and attempt, in one
-- statement for a whole report (a statement per attempt that logged was a sixth of the
-- completer's time in a drain where one job in ten logs). The lines of an attempt whose
-- claim is lost are refused (not written).
INSERT INTO job_logs (job_id, attempt_id, created_at, level, message)
SELECT entry.job_id, entry.attempt_id, entry.created_at, entry.level, entry.message
FROM unnest(%(job_ids)s::uuid[], %(attempt_ids)s::uuid[], %(created_at)s::timestamptz[],
            %(levels)s::text[], %(messages)s::text[])
     AS entry(job_id, attempt_id, created_at, level, message)
WHERE (entry.job_id, entry.attempt_id) IN (
    SELECT id, current_attempt_id FROM jobs
    WHERE id = ANY(%(job_ids)s::uuid[]) AND status = 'processing');

-- name: create_job
-- Create one job (`jobs.state.enqueue`) and, when it waits on nothing, wake the listening
-- workers with its id, priority, run_at and created_at, in the same statement: the NOTIFY
-- is delivered when the surrounding transaction commits, and never without the job.
-- When an operator creates it (`actor`, NULL: the system), its audit entry is written too.
-- Its object names no dependency: a dependent job's edge is written after the row, and
-- `enqueue` reads that job's object again (and audits it with `audit_created_job`).
-- The notification and the audit entry are made in RETURNING, from the row as inserted:
-- as CTEs over `INSERT ... RETURNING *`, each joined in through a count, the statement
-- materialized the row and set up two more scans and aggregates at every call (10-15 us
-- of a 200 us execution).
INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count, max_retries,
                  scheduled_at, recur_interval, in_dlq, created_at, updated_at,
                  run_at, virtual_deadline, pending_dependencies)
VALUES (scheduler_uuid7(), %(type)s, %(queue)s, %(payload)s, %(priority)s, 'pending', 0,
        %(max_retries)s, %(run_at)s, %(recur_interval)s, false, %(now)s, %(now)s,
        %(run_at)s, scheduler_virtual_deadline(%(priority)s, %(run_at)s),
        %(pending_dependencies)s)
RETURNING id, scheduler_job_object(jobs, '{}')::text AS job,
          CASE WHEN pending_dependencies = 0 THEN
              pg_notify(%(channel)s, json_build_object('id', id, 'type', type,
                                                       'priority', priority,
                                                       'run_at', run_at,
                                                       'created_at', created_at,
                                                       'queue', queue)::text)
          END AS woken,
          CASE WHEN %(actor)s::jsonb IS NOT NULL THEN
              scheduler_audit_created(jobs, '{}', %(actor)s::jsonb)
          END AS audited;

-- name: audit_created_job
-- The audit entry of an operator's creation of `job_id`, its dependency edges written.
SELECT scheduler_audit_created(j, up.ids, %(actor)s::jsonb)
FROM jobs AS j CROSS JOIN LATERAL scheduler_upstream_ids(j.id) AS up
WHERE j.id = %(job_id)s;

-- name: create_jobs
-- Create many independent jobs in one statement (`jobs.state.enqueue_many`), in the order
-- given, and wake the listening workers once with `feed` (they read what is runnable).
-- `jobs` is one JSON array of {type, queue, payload, priority, max_retries, run_at, recur_interval}
-- (`run_at` null: now): one parameter, encoded in one call, rather than six arrays.
WITH new AS (
    INSERT INTO jobs (id, type, queue, payload, priority, status, attempt_count, max_retries,
                      scheduled_at, recur_interval, in_dlq, created_at, updated_at,
                      run_at, virtual_deadline, pending_dependencies)
    SELECT scheduler_uuid7(), s.type, s.queue, s.payload, s.priority, 'pending', 0, s.max_retries,
           s.run_at, s.recur_interval, false, %(now)s, %(now)s,
           s.run_at, scheduler_virtual_deadline(s.priority, s.run_at), 0
    FROM (
        SELECT job->>'type' AS type, job->>'queue' AS queue, job->'payload' AS payload,
               (job->>'priority')::integer AS priority,
               (job->>'max_retries')::integer AS max_retries,
               coalesce((job->>'run_at')::timestamptz, %(now)s) AS run_at,
               job->>'recur_interval' AS recur_interval, n
        FROM jsonb_array_elements(%(jobs)s::jsonb) WITH ORDINALITY AS given(job, n)
    ) AS s
    ORDER BY s.n
    RETURNING *
), woken AS (
    SELECT pg_notify(%(channel)s, %(feed)s) WHERE EXISTS (SELECT FROM new)
)
SELECT scheduler_job_object(ROW(new.*)::jobs, '{}')::text AS job
FROM new CROSS JOIN (SELECT count(*) FROM woken) AS notified;

-- name: take_idempotency_key
-- Take `key` for a new job, unless a live holder has it: a row back means ours. Of two
-- requests racing with one key, the second waits on the unique index until the first
-- commits, then finds its row live and gets nothing back. A holder older than the window
-- is taken over.
INSERT INTO idempotency_keys (key, fingerprint, job_id, created_at)
VALUES (%(key)s, %(fingerprint)s, NULL, now())
ON CONFLICT (key) DO UPDATE
SET fingerprint = excluded.fingerprint, job_id = NULL, job_ids = NULL,
    created_at = excluded.created_at
WHERE idempotency_keys.created_at < now() - make_interval(secs => %(window)s)
RETURNING key;

-- name: idempotency_key_holder
-- The job that holds `key` (a batch's first, with all of them in `job_ids`), and the
-- fingerprint of the request that created it.
SELECT fingerprint, job_id, job_ids FROM idempotency_keys WHERE key = %(key)s;

-- name: bind_idempotency_key
UPDATE idempotency_keys SET job_id = %(job_id)s, job_ids = %(job_ids)s::uuid[]
WHERE key = %(key)s;

-- name: job_objects
-- The API job objects of the jobs `job_ids` names, in that order; none for an unknown id.
SELECT scheduler_job_object(j)::text AS job
FROM unnest(%(job_ids)s::uuid[]) WITH ORDINALITY AS wanted (id, position)
JOIN jobs j ON j.id = wanted.id
ORDER BY wanted.position;

-- name: lock_upstream_jobs
-- The status of each upstream job of a new dependent, share-locked in id order until the
-- enqueue commits: a completion or cancellation of one waits, then sees the new edge.
SELECT id, status FROM jobs
WHERE id = ANY(%(job_ids)s::uuid[])
ORDER BY id
FOR SHARE;

-- name: notify_runnable
-- Wake the listening workers; delivered when the surrounding transaction commits.
SELECT pg_notify(%(channel)s, payload) FROM unnest(%(payloads)s::text[]) AS payload;

-- name: runnable_jobs
-- The worker's feeder: runnable jobs due before `horizon` (or only `job_ids`), with what the
-- in-memory scheduler orders them by. The claimable index serves it in order. The queues
-- are those of `claim_jobs`; `unhandled_types`, those the worker has no handler for, whose
-- jobs would otherwise fill the limit.
SELECT id, type, priority, run_at, created_at
FROM jobs
WHERE status IN ('pending', 'failed')
  AND NOT in_dlq
  AND pending_dependencies = 0
  AND run_at <= %(horizon)s
  AND (%(job_ids)s::uuid[] IS NULL OR id = ANY(%(job_ids)s::uuid[]))
  AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
  AND queue <> ALL (%(other_queues)s::text[])
  AND type <> ALL (%(unhandled_types)s::text[])
  AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = jobs.queue AND q.paused)
ORDER BY virtual_deadline, created_at, id
LIMIT %(limit)s;

-- name: lost_claims
-- Which of a worker's running attempts no longer hold their job's claim (cancelled,
-- rescued while the worker was away), with the job's status now (none for a job deleted
-- since), which tells the worker why: it stops waiting for them. The others it
-- vouches for: a job whose heartbeat (or start) is older than `vouch_before` gets a new
-- heartbeat, so the rescue of stuck jobs never takes back a job its live worker still
-- runs, however long its handler's timeout. A row locked meanwhile (its completion, a
-- cancel) is skipped, not waited for: the next watch vouches for it.
WITH held AS (
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(attempt_ids)s::uuid[]) AS held(job_id, attempt_id)
), vouched AS (
    UPDATE jobs SET heartbeat_at = now()
    WHERE id IN (
        SELECT j.id FROM jobs j JOIN held
          ON j.id = held.job_id AND j.status = 'processing'
         AND j.current_attempt_id = held.attempt_id
        WHERE greatest(j.heartbeat_at, j.started_at) < %(vouch_before)s
        FOR UPDATE OF j SKIP LOCKED
    )
)
SELECT held.job_id, j.status
FROM held
LEFT JOIN jobs j ON j.id = held.job_id
WHERE j.id IS NULL OR j.status <> 'processing'
   OR j.current_attempt_id IS DISTINCT FROM held.attempt_id;

-- name: held_claims
-- The jobs among `job_ids` that `worker_id` holds (`processing` under it), with the claim's
-- token and the job object as `claim_jobs` returns them: after a claim whose answer the
-- worker never had (its connection broke once the statement was sent), the ones it did
-- claim. Reads only.
SELECT j.id, j.current_attempt_id, scheduler_job_object(j)::text AS job
FROM jobs j
WHERE j.id = ANY(%(job_ids)s::uuid[]) AND j.status = 'processing'
  AND j.worker_id = %(worker_id)s
ORDER BY j.virtual_deadline, j.created_at, j.id;

-- name: job_object
-- The API job object of one job, as text; no row for an unknown id.
SELECT scheduler_job_object(j)::text AS job FROM jobs j WHERE j.id = %(job_id)s;

-- name: job_stats
-- The counters of GET /jobs/stats, from `job_counts` (schema.sql), never from `jobs`: the
-- sum per counter, and how many rows were summed (`fold_job_counts` keeps that small).
SELECT key, sum(n) AS n, count(*) AS summed
FROM job_counts
GROUP BY key;

-- name: job_counts_by_queue
-- The same counters per queue (the `scheduler_jobs` gauge of GET /metrics).
SELECT key, queue, sum(n) AS n, count(*) AS summed
FROM job_counts
GROUP BY key, queue;

-- name: fold_job_counts
-- Collapse the appended counter rows into one per counter and queue, in one transaction: a
-- reader sees the rows before or the row after, the same sums either way. Two folds at once
-- are safe too: a row is deleted, hence summed, by one of them only. Nothing is done when
-- every counter is already one row per queue.
WITH folded AS (
    DELETE FROM job_counts
    WHERE EXISTS (SELECT 1 FROM job_counts GROUP BY key, queue HAVING count(*) > 1)
    RETURNING key, queue, n
), summed AS (
    INSERT INTO job_counts (key, queue, n)
    SELECT key, queue, sum(n) FROM folded GROUP BY key, queue HAVING sum(n) <> 0
)
SELECT count(*) AS folded FROM folded;

-- name: stored_job_types
-- The types the stored jobs have, in order: a skip scan of `jobs_type_idx`, one index
-- look-up per type (0.6 ms for 45 types among a million jobs, where a DISTINCT read every
-- job: 190 ms). Not the registry's names: a Django task's type is registered only where
-- its module was imported, and a type a deploy removed by no process.
WITH RECURSIVE found AS (
    (SELECT type FROM jobs ORDER BY type LIMIT 1)
    UNION ALL
    SELECT (SELECT j.type FROM jobs j WHERE j.type > found.type ORDER BY j.type LIMIT 1)
    FROM found WHERE found.type IS NOT NULL
)
SELECT type FROM found WHERE type IS NOT NULL;

-- name: dlq_by_type
-- The DLQ's largest job types, from `dlq_counts` (schema.sql), never from `jobs`.
SELECT type AS value, sum(n) AS n FROM dlq_counts
WHERE bucket IS NULL
GROUP BY type HAVING sum(n) > 0
ORDER BY n DESC, type LIMIT %(limit)s;

-- name: dlq_by_error
-- The DLQ's most common errors: its error signatures without their job type (the error
-- class and the message with what varies masked, `scheduler_error_signature`), so that
-- messages that differ by an id or a number count as one error, whatever the type it
-- failed. Counted by message, a timeout that names its duration was a bar of one per
-- duration. An error is named by its message when that never varies, else by its mask.
WITH messages AS (
    SELECT substr(error_signature, char_length(type) + char_length(' · ') + 1) AS error,
           last_error, sum(n) AS n
    FROM dlq_counts
    WHERE bucket IS NULL
    GROUP BY 1, 2 HAVING sum(n) > 0
)
SELECT CASE WHEN count(*) = 1 THEN min(last_error) ELSE error END AS value, sum(n) AS n
FROM messages
GROUP BY error
ORDER BY n DESC, value LIMIT %(limit)s;

-- name: dlq_by_signature
-- The DLQ's largest groups of dead letters alike (by error signature).
SELECT error_signature AS value, sum(n) AS n FROM dlq_counts
WHERE bucket IS NULL
GROUP BY error_signature HAVING sum(n) > 0
ORDER BY n DESC, error_signature LIMIT %(limit)s;

-- name: dlq_signature_days
-- Dead letters per day of `time_zone` since `since` (a midnight there), for the groups of
-- `signatures` (and of the dead letters without one when `unsigned`).
SELECT error_signature, (bucket AT TIME ZONE %(time_zone)s)::date AS day, sum(n) AS n
FROM dlq_counts
WHERE type IS NULL AND bucket >= %(since)s
  AND (error_signature = ANY(%(signatures)s) OR (%(unsigned)s AND error_signature IS NULL))
GROUP BY 1, 2;

-- name: fold_dlq_counts
-- Collapse the DLQ's appended group rows into one per group, as `fold_job_counts` does, and
-- drop the recent arrivals older than `before` (no page reads them).
WITH folded AS (
    DELETE FROM dlq_counts
    WHERE EXISTS (SELECT 1 FROM dlq_counts GROUP BY type, error_signature, last_error, bucket
                  HAVING count(*) > 1)
       OR EXISTS (SELECT 1 FROM dlq_counts WHERE bucket < %(before)s)
    RETURNING type, error_signature, last_error, bucket, n
), summed AS (
    INSERT INTO dlq_counts (type, error_signature, last_error, bucket, n)
    SELECT type, error_signature, last_error, bucket, sum(n) FROM folded
    WHERE bucket IS NULL OR bucket >= %(before)s
    GROUP BY type, error_signature, last_error, bucket HAVING sum(n) <> 0
)
SELECT count(*) AS folded FROM folded;

-- name: failures_per_hour
-- Failed attempts per real hour from `since` (an hour's start on the viewer's clock), from
-- `failure_counts` (schema.sql), never from `job_attempts`. Counted in hours from `since`,
-- not on the local clock, which names two hours alike on the day it is put back. A
-- quarter-hour bucket falls in one hour, as every zone's offset is whole quarters of an hour.
SELECT date_bin(make_interval(hours => 1), bucket, %(since)s) AS hour, sum(n) AS n
FROM failure_counts
WHERE bucket >= %(since)s
GROUP BY 1;

-- name: fold_failure_counts
-- Collapse the appended rows into one per quarter of an hour and drop those older than
-- `before`, as `fold_dlq_counts` does.
WITH folded AS (
    DELETE FROM failure_counts
    WHERE EXISTS (SELECT 1 FROM failure_counts GROUP BY bucket HAVING count(*) > 1)
       OR EXISTS (SELECT 1 FROM failure_counts WHERE bucket < %(before)s)
    RETURNING bucket, n
), summed AS (
    INSERT INTO failure_counts (bucket, n)
    SELECT bucket, sum(n) FROM folded WHERE bucket >= %(before)s
    GROUP BY bucket HAVING sum(n) <> 0
)
SELECT count(*) AS folded FROM folded;

-- name: take_prune_turn
-- One pruner at a time: the others skip their turn rather than wait, or delete the same
-- rows twice. Held until the pruner's transaction ends.
SELECT pg_try_advisory_xact_lock(hashtext('scheduler_prune')) AS ours;

-- name: lock_prunable_jobs
-- Up to `limit` jobs past their retention, oldest first: completed or cancelled before
-- `finished_before`, dead letters failed before `dlq_before` (NULL keeps them all). Jobs a
-- waiting job depends on are passed over, here already so that a batch is never full of
-- them, and so are dead letters that hold a series (a recurring job, a run of a schedule
-- not paused): only a retry goes on from them, and pruned, the series ended unseen. Locked rows are skipped: a job someone is acting on is not pruned under them.
-- Cancelled is final and only a cancel sets `cancelled_at`, so the cancelled branch walks
-- `jobs_cancelled_idx` alone: with `status = 'cancelled'` too, the planner multiplied the
-- two selectivities, expected too few rows for the LIMIT and read every cancelled job
-- past the retention (with its `scheduler_waited_on`) to sort them: 190 ms a batch at 1M.
SELECT id FROM jobs
WHERE id IN ((SELECT id FROM jobs
              WHERE status = 'completed' AND completed_at < %(finished_before)s
                AND NOT scheduler_waited_on(id)
              ORDER BY completed_at LIMIT %(limit)s)
             UNION ALL
             (SELECT id FROM jobs
              WHERE cancelled_at < %(finished_before)s
                AND NOT scheduler_waited_on(id)
              ORDER BY cancelled_at LIMIT %(limit)s)
             UNION ALL
             (SELECT id FROM jobs
              WHERE in_dlq AND updated_at < %(dlq_before)s
                AND NOT scheduler_waited_on(id)
                AND recur_interval IS NULL
                AND NOT EXISTS (SELECT FROM schedules s
                                WHERE s.id = jobs.schedule_id AND NOT s.paused)
              ORDER BY updated_at LIMIT %(limit)s))
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: prune_jobs
-- Delete the locked candidates, asking again (a statement later, so it sees dependency
-- edges committed meanwhile) whether a waiting job depends on one. A job added with
-- `depends_on` one of them waits on its row lock, then finds it gone: a 400, never an edge
-- to a deleted job.
SELECT * FROM scheduler_delete_jobs(
    ARRAY(SELECT id FROM unnest(%(job_ids)s::uuid[]) AS id WHERE NOT scheduler_waited_on(id)));

-- name: job_metrics
-- The metric rows of `job_metrics` (schema.sql), summed per series, and how many rows were
-- summed (`fold_job_metrics` keeps that small).
SELECT name, type, queue, label, le, sum(n) AS n, sum(total) AS total, count(*) AS summed
FROM job_metrics
GROUP BY name, type, queue, label, le;

-- name: fold_job_metrics
-- Collapse the appended metric rows into one per series, as `fold_job_counts` does.
WITH folded AS (
    DELETE FROM job_metrics
    WHERE EXISTS (SELECT 1 FROM job_metrics GROUP BY name, type, queue, label, le
                  HAVING count(*) > 1)
    RETURNING name, type, queue, label, le, n, total
), summed AS (
    INSERT INTO job_metrics (name, type, queue, label, le, n, total)
    SELECT name, type, queue, label, le, sum(n), sum(total) FROM folded
    GROUP BY name, type, queue, label, le
)
SELECT count(*) AS folded FROM folded;

-- name: metric_buckets
SELECT scheduler_metric_buckets() AS buckets;

-- name: count_prune
-- One pruner pass (the holder of the prune turn), and the jobs it deleted.
INSERT INTO job_metrics (name, n, total)
VALUES ('prune_runs', 1, 0), ('pruned_jobs', %(jobs)s, 0);

-- name: worker_metrics
-- Every worker that claims it is alive, with its handler slots, the jobs it runs now, how
-- long ago it last beat and the job types it has no handler for.
SELECT w.id, w.hostname, w.pid, w.status, w.concurrency, w.unhandled_types,
       extract(epoch FROM now() - w.heartbeat_at)::double precision AS heartbeat_age,
       (SELECT count(*) FROM jobs j WHERE j.status = 'processing' AND j.worker_id = w.id) AS busy
FROM workers w
WHERE w.status IN ('running', 'stopping');

-- name: prune_audit_log
-- Up to `limit` audit entries older than `before`, oldest first (`audit_log_at_idx`).
WITH gone AS (
    DELETE FROM audit_log
    WHERE id IN (SELECT id FROM audit_log WHERE at < %(before)s ORDER BY at, id LIMIT %(limit)s)
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: prune_idempotency_keys
-- Up to `limit` idempotency keys past the window, oldest first (`idempotency_keys_created_idx`):
-- a request under one creates anew anyway (`take_idempotency_key`). A job's key also goes
-- with its job; a batch's only here.
WITH gone AS (
    DELETE FROM idempotency_keys
    WHERE key IN (SELECT key FROM idempotency_keys
                  WHERE created_at < now() - make_interval(secs => %(window)s)
                  ORDER BY created_at LIMIT %(limit)s)
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: prune_workers
-- Up to `limit` workers that stopped or were declared dead before `before` (NULL keeps
-- them all), oldest first: a row is written per worker process, so restarts and
-- autoscaling add rows for ever. A worker still running, or silent but not yet declared
-- dead, stays: only the rescue tells a lost worker from a database nobody could reach.
-- Nor goes one that a job is still processing under (`jobs_worker_idx`, a job locked when
-- the rescue declared its worker dead, or one of a worker cut off that may beat again):
-- the line of that job's rescue names the worker by host, the console shows it beside the
-- job. Attempts and finished jobs keep the id of a deleted worker (no constraint,
-- `Job.worker`). The status is asked again of the row deleted, so one that a heartbeat
-- brought back meanwhile stays. The ids go through an array so the rows are deleted by
-- primary key: joined as a subquery, the table was read twice (200,000 stopped workers:
-- 130 ms a batch this way, 410 ms so).
WITH gone AS (
    DELETE FROM workers
    WHERE id = ANY(ARRAY(
              SELECT id FROM workers w
              WHERE status IN ('stopped', 'dead')
                AND coalesce(stopped_at, heartbeat_at) < %(before)s
                AND NOT EXISTS (SELECT 1 FROM jobs j
                                WHERE j.status = 'processing' AND j.worker_id = w.id)
              ORDER BY coalesce(stopped_at, heartbeat_at)
              LIMIT %(limit)s))
      AND status IN ('stopped', 'dead')
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: prune_sessions
-- Up to `limit` sessions expired before `now`, oldest first (`django_session`'s index on
-- `expire_date`): Django leaves them to `clearsessions`, which deletes every one in a
-- single statement. Expired is Django's own rule (`expire_date` past), asked again of the
-- row deleted, so a session a request renewed meanwhile stays signed in.
WITH gone AS (
    DELETE FROM django_session
    WHERE session_key = ANY(ARRAY(SELECT session_key FROM django_session
                                  WHERE expire_date < %(now)s
                                  ORDER BY expire_date LIMIT %(limit)s))
      AND expire_date < %(now)s
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: prune_login_records
-- Of the `limit` oldest login records (django-axes' access log, a row per sign-in), those
-- signed in before `before` (NULL keeps them all). django-axes indexes no time, so a
-- search for the rows older than `before` would read the whole log, every pass, even
-- when none is due (200,000 records: 21 ms so, 1 ms this way). A record is written as
-- its login happens, so the order of ids is that of `attempt_time` (to the length of a
-- request): the oldest rows by primary key are the ones due first, and a pass reads
-- `limit` of them however long the log.
WITH gone AS (
    DELETE FROM axes_accesslog
    WHERE id = ANY(ARRAY(SELECT id FROM axes_accesslog ORDER BY id LIMIT %(limit)s))
      AND attempt_time < %(before)s
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: jobs_ahead
-- How many due jobs the claim would take before this one (counted up to `up_to` + 1):
-- the claim's predicate and order, so the claimable index serves it as a range; the
-- queues are those the workers that could take this one serve (`claim_jobs`' parameters).
SELECT count(*) AS ahead
FROM (SELECT 1 FROM jobs
      WHERE status IN ('pending', 'failed')
        AND NOT in_dlq
        AND pending_dependencies = 0
        AND run_at <= now()
        AND (virtual_deadline, created_at, id) < (%(virtual_deadline)s, %(created_at)s, %(id)s)
        AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
        AND queue <> ALL (%(other_queues)s::text[])
        AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = jobs.queue AND q.paused)
      ORDER BY virtual_deadline, created_at, id
      LIMIT %(up_to)s + 1) AS ahead;
