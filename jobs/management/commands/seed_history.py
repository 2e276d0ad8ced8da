"""`manage.py seed_history --rows N`: a month of finished jobs, loaded fast, for volume tests.

Where `seed_db` replays a few demo jobs through the state machine, this is a loader: it
writes history that already happened (finished attempts, their logs, the DLQ) straight
into the schema with set-based SQL over `generate_series`, like a restore would, about a
minute per million jobs. Nothing is left runnable: every job is finished, cancelled, in the
DLQ or scheduled in the future, so a worker started afterwards meets a table with a month
of history and nothing to do. The shares below are drawn per row from `setseed(--seed)`.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.db import connection, transaction
from django.utils import timezone

from jobs.command_options import positive_int
from jobs.limits import EARLIEST_YEAR, EPOCH
from jobs.management.commands._database import DatabaseCommand

DEFAULT_DAYS = 30
DEFAULT_SEED = 0.2026
# Upper bounds of a uniform draw: what becomes of a job (the rest are scheduled later).
COMPLETED_UP_TO = 0.93
CANCELLED_UP_TO = 0.97
DLQ_UP_TO = 0.99
# Job types and the upper bounds of their shares.
TYPE_SHARES = (
    ("send_email", 0.40),
    ("http_request", 0.65),
    ("generate_report", 0.80),
    ("noop", 0.95),
    ("flaky", 1.0),
)
HISTORY_WORKERS = 4

# One row per job with every random draw it needs; the statements below only combine them.
_DRAW = """
CREATE TEMP TABLE seed_history AS
SELECT gen_random_uuid() AS id,
       n,
       CASE WHEN f < %(completed)s THEN 'completed'
            WHEN f < %(cancelled)s THEN 'cancelled'
            WHEN f < %(dlq)s THEN 'dlq'
            ELSE 'scheduled' END AS fate,
       CASE {type_cases} END AS type,
       CASE WHEN p < 0.2 THEN 1 WHEN p < 0.8 THEN 2 ELSE 3 END AS priority,
       now() - interval '1 minute' - t * %(days)s * interval '1 day' AS drawn_at,
       a AS attempt_draw,
       -- Handler durations are skewed: most take milliseconds, a few take seconds.
       5 + floor(d * d * d * 3000)::int AS duration_ms,
       (n %% %(workers)s) AS worker_slot
FROM (
    SELECT n, random() AS f, random() AS k, random() AS p, random() AS t, random() AS a,
           random() AS d
    FROM generate_series(1, %(rows)s) AS n
) draws
"""

_JOBS = """
INSERT INTO jobs (id, type, payload, priority, status, attempt_count, max_retries,
                  scheduled_at, recur_interval, in_dlq, created_at, updated_at, started_at,
                  completed_at, cancelled_at, next_retry_at, last_error, result, worker_id,
                  run_at, virtual_deadline, pending_dependencies, current_attempt_id,
                  previous_run_id, error_signature)
SELECT s.id, s.type, s.payload, s.priority,
       CASE s.fate WHEN 'completed' THEN 'completed' WHEN 'cancelled' THEN 'cancelled'
                   WHEN 'dlq' THEN 'failed' ELSE 'pending' END,
       s.attempts, 3, s.run_at, NULL, s.fate = 'dlq', s.created_at,
       coalesce(s.finished_at, s.cancelled_at, s.created_at),
       s.first_started_at,
       CASE WHEN s.fate = 'completed' THEN s.finished_at END,
       s.cancelled_at, NULL,
       CASE WHEN s.fate = 'dlq' THEN 'HTTP 503 from https://hooks.example.com/orders' END,
       CASE WHEN s.fate = 'completed' THEN s.result END,
       CASE WHEN s.attempts > 0 THEN w.id END,
       s.run_at, scheduler_virtual_deadline(s.priority, s.run_at), 0, NULL, NULL,
       -- As `fail_jobs` stores it when the last attempt fails.
       CASE WHEN s.fate = 'dlq' THEN scheduler_error_signature(
           s.type, 'HandlerFailure', 'HTTP 503 from https://hooks.example.com/orders') END
FROM seed_history_jobs s
LEFT JOIN seed_history_workers w ON w.slot = s.worker_slot
ORDER BY s.created_at
"""

# Attempt k starts after the backoff of the failures before it (5^(k-1) s, as the worker's).
# A job whose history would end after the seed's now (cancelled up to an hour after it was
# created, a few minutes ago) is created earlier, so that every time it has is past.
_JOB_SHAPES = """
CREATE TEMP TABLE seed_history_jobs AS
SELECT h.*, moved.created_at,
       CASE h.fate WHEN 'scheduled' THEN now() + interval '1 hour' + h.attempt_draw
                                                  * interval '7 days'
                   ELSE moved.created_at END AS run_at,
       CASE WHEN h.attempts > 0 THEN moved.created_at + interval '40 milliseconds' END
           AS first_started_at,
       moved.created_at + life.attempts_end AS finished_at,
       moved.created_at + life.cancelled_after AS cancelled_at,
       CASE h.type
           WHEN 'send_email' THEN jsonb_build_object('sent', 1, 'to', h.payload ->> 'to')
           WHEN 'http_request' THEN jsonb_build_object('status', 200)
           WHEN 'generate_report' THEN jsonb_build_object('rows', h.n %% 5000)
           ELSE 'null'::jsonb END AS result
FROM (
    SELECT d.*,
           CASE d.fate
               WHEN 'dlq' THEN 3
               WHEN 'completed' THEN CASE WHEN d.attempt_draw < 0.92 THEN 1
                                          WHEN d.attempt_draw < 0.98 THEN 2 ELSE 3 END
               ELSE 0 END AS attempts,
           CASE d.type
               WHEN 'send_email' THEN jsonb_build_object(
                   'to', 'user' || d.n || '@example.com', 'subject', 'Your invoice',
                   'html', '<p>Invoice ' || d.n || '</p>')
               WHEN 'http_request' THEN jsonb_build_object(
                   'url', 'https://hooks.example.com/orders', 'method', 'POST',
                   'json', jsonb_build_object('order', d.n))
               WHEN 'generate_report' THEN jsonb_build_object(
                   'report', 'sales', 'rows', d.n %% 5000)
               WHEN 'flaky' THEN jsonb_build_object('failure_rate', 0.3)
               ELSE '{}'::jsonb END AS payload
    FROM seed_history d
) h
CROSS JOIN LATERAL (
    SELECT CASE WHEN h.attempts > 0 THEN interval '40 milliseconds'
                     + (power(5, h.attempts - 1) - 1) / 4 * interval '5 seconds'
                     + h.attempts * h.duration_ms * interval '1 millisecond' END AS attempts_end,
           CASE WHEN h.fate = 'cancelled' THEN h.attempt_draw * interval '1 hour' END
               AS cancelled_after
) life
CROSS JOIN LATERAL (
    SELECT least(h.drawn_at, now() - coalesce(life.attempts_end, life.cancelled_after,
                                              interval '0')) AS created_at
) moved
"""

_ATTEMPTS = """
INSERT INTO job_attempts (id, job_id, attempt_number, status, started_at, finished_at,
                          duration_ms, error_type, error_message, stack_trace, worker_id)
SELECT gen_random_uuid(), s.id, k,
       CASE WHEN s.fate = 'completed' AND k = s.attempts THEN 'succeeded' ELSE 'failed' END,
       started, started + s.duration_ms * interval '1 millisecond', s.duration_ms,
       CASE WHEN s.fate = 'completed' AND k = s.attempts THEN NULL ELSE 'HandlerFailure' END,
       CASE WHEN s.fate = 'completed' AND k = s.attempts THEN NULL
            ELSE 'HTTP 503 from https://hooks.example.com/orders' END,
       CASE WHEN s.fate = 'completed' AND k = s.attempts THEN NULL
            ELSE E'Traceback (most recent call last):\n  File "worker/handlers.py", line 96,'
                 ' in http_request\nworker.handlers.HandlerFailure: HTTP 503' END,
       w.id
FROM seed_history_jobs s
CROSS JOIN LATERAL generate_series(1, s.attempts) AS k
CROSS JOIN LATERAL (
    SELECT s.first_started_at + (power(5, k - 1) - 1) / 4 * interval '5 seconds'
           + (k - 1) * s.duration_ms * interval '1 millisecond' AS started
) times
LEFT JOIN seed_history_workers w ON w.slot = s.worker_slot
ORDER BY started
"""

# The line a handler logs, for the types that log one, once per attempt.
_LOGS = """
INSERT INTO job_logs (job_id, attempt_id, created_at, level, message)
SELECT a.job_id, a.id, a.finished_at,
       CASE a.status WHEN 'succeeded' THEN 'INFO' ELSE 'WARNING' END,
       CASE a.status WHEN 'succeeded' THEN 'finished ' || s.type
            ELSE 'attempt ' || a.attempt_number || ' failed: HTTP 503' END
FROM job_attempts a
JOIN seed_history_jobs s ON s.id = a.job_id
WHERE s.type IN ('send_email', 'generate_report') OR a.status = 'failed'
"""


def _draw_sql() -> str:
    cases = [
        f"WHEN k < {upper} THEN '{name}'" if upper < 1 else f"ELSE '{name}'"
        for name, upper in TYPE_SHARES
    ]
    return _DRAW.format(type_cases=" ".join(cases))


def max_days() -> int:
    """The most --days: the history (and its workers, started --days ago) begins a day after
    1970 began, so that it is in 1970 or later in every time zone."""
    return (timezone.now() - EPOCH).days - 1


class Command(DatabaseCommand):
    help = (
        "Load a month of realistic job history (finished, cancelled, DLQ, scheduled; attempts "
        "and logs) with set-based SQL. Refuses when DEBUG is off, unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rows", type=positive_int, required=True, help="jobs to add")
        parser.add_argument(
            "--days",
            type=positive_int,
            default=DEFAULT_DAYS,
            help=f"how far back the history reaches, at most to {EARLIEST_YEAR} "
            f"(default {DEFAULT_DAYS})",
        )
        parser.add_argument(
            "--seed",
            type=float,
            default=DEFAULT_SEED,
            help=f"random seed in [-1, 1]: one seed gives the same shares (default {DEFAULT_SEED})",
        )
        parser.add_argument("--force", action="store_true", help="run even when DEBUG is off")

    def handle(self, *args: Any, **options: Any) -> None:
        database = connection.settings_dict["NAME"]
        if not settings.DEBUG and not options["force"]:
            raise CommandError(
                f"DEBUG is off: this may be a production database ({database}), and "
                "seed_history adds made-up jobs to it. Pass --force if you mean it."
            )
        if not -1 <= options["seed"] <= 1:
            raise CommandError(f"--seed must be in [-1, 1], got {options['seed']}")
        if options["days"] > (most := max_days()):
            raise CommandError(
                f"--days reaches back at most to {EARLIEST_YEAR}, the earliest year a job's "
                f"times are written with: at most {most:,} days today, got {options['days']:,}"
            )
        params = {
            "rows": options["rows"],
            "days": options["days"],
            "completed": COMPLETED_UP_TO,
            "cancelled": CANCELLED_UP_TO,
            "dlq": DLQ_UP_TO,
            "workers": HISTORY_WORKERS,
        }
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT setseed(%s)", [options["seed"]])
            cursor.execute(
                "CREATE TEMP TABLE seed_history_workers AS "
                "SELECT gen_random_uuid() AS id, slot FROM generate_series(0, %s - 1) AS slot",
                [HISTORY_WORKERS],
            )
            cursor.execute(
                "INSERT INTO workers (id, hostname, pid, status, scheduler, concurrency,"
                " started_at, heartbeat_at, stopped_at, jobs_done)"
                " SELECT id, 'history-' || slot, 1000 + slot, 'stopped', 'heap', 4,"
                " now() - %s * interval '1 day', now() - interval '1 minute',"
                " now() - interval '1 minute', 0 FROM seed_history_workers",
                [options["days"]],
            )
            cursor.execute(_draw_sql(), params)
            cursor.execute(_JOB_SHAPES, params)
            cursor.execute(_JOBS)
            jobs = cursor.rowcount
            cursor.execute(_ATTEMPTS)
            attempts = cursor.rowcount
            cursor.execute(_LOGS)
            logs = cursor.rowcount
            cursor.execute(
                "UPDATE workers w SET jobs_done = jobs_done + done.n FROM ("
                " SELECT worker_id, count(*) AS n FROM job_attempts a"
                " JOIN seed_history_workers h ON h.id = a.worker_id"
                " WHERE a.status = 'succeeded' GROUP BY worker_id) done"
                " WHERE w.id = done.worker_id"
            )
            cursor.execute("DROP TABLE seed_history, seed_history_jobs, seed_history_workers")
        # What autovacuum would have done over a month; the planner needs it right away.
        with connection.cursor() as cursor:
            for table in ("jobs", "job_attempts", "job_logs", "workers"):
                cursor.execute(f"ANALYZE {table}")
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"Added {jobs:,} jobs, {attempts:,} attempts and {logs:,} log lines "
            f"over {options['days']} days to {database} in {seconds:.1f} s."
        )
