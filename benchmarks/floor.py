"""The bare-SQL floor: what PostgreSQL itself costs for the same workload, with bare psycopg.

Its own table (`bench_floor_jobs`, a primary key and one partial index) in the benchmark's
database. Enqueue is one `INSERT ... RETURNING` + `pg_notify` statement per job in
autocommit, its own transaction in one round trip, as the project's `enqueue()` outside a
caller's transaction (a BEGIN and a COMMIT of its own were two more round trips: a floor
above the cheapest bare loop). The batch is one COPY and one NOTIFY; the worker claims 100
rows per statement (`FOR UPDATE SKIP LOCKED`), runs them, and completes them with one
statement, and when there is nothing to claim it waits on LISTEN. No retries, no attempts,
no events: a floor.

    python -m benchmarks.floor worker DATABASE_URL REDIS_URL
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from benchmarks.probes import record_start

CHANNEL = "bench_floor"
CLAIM_BATCH = 100

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_floor_jobs (
    id bigserial PRIMARY KEY,
    type text NOT NULL,
    payload jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS bench_floor_jobs_pending ON bench_floor_jobs (id)
    WHERE status = 'pending';
"""
ENQUEUE = (
    "WITH job AS (INSERT INTO bench_floor_jobs (type, payload) VALUES (%s, %s) RETURNING id)"
    " SELECT pg_notify('bench_floor', id::text) FROM job"
)
CLAIM = (
    "UPDATE bench_floor_jobs SET status = 'running', started_at = now() WHERE id IN ("
    " SELECT id FROM bench_floor_jobs WHERE status = 'pending' ORDER BY id"
    " LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id, type, payload"
)
COMPLETE = "UPDATE bench_floor_jobs SET status = 'done', finished_at = now() WHERE id = ANY(%s)"


class Floor:
    def __init__(self, database_url: str, redis_url: str) -> None:
        self.database_url = database_url
        self.redis_url = redis_url
        self.connection = psycopg.connect(database_url, autocommit=True)
        with self.connection.transaction():
            self.connection.execute(SCHEMA)

    def prepare(self) -> None:
        with self.connection.transaction():
            self.connection.execute("TRUNCATE bench_floor_jobs")

    def _enqueue(self, type: str, payload: dict[str, Any]) -> None:
        self.connection.execute(ENQUEUE, [type, Jsonb(payload)])

    def enqueue_one(self) -> None:
        self._enqueue("noop", {})

    def enqueue_probe(self, payload: dict[str, Any]) -> None:
        self._enqueue("probe", payload)

    def enqueue_batch(self, count: int) -> bool:
        with self.connection.transaction(), self.connection.cursor() as cursor:
            with cursor.copy("COPY bench_floor_jobs (type, payload) FROM STDIN") as copy:
                for _ in range(count):
                    copy.write_row(("noop", "{}"))
            cursor.execute(f"NOTIFY {CHANNEL}")
        return True

    def start_worker(self, variant: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # noqa: S603 - this module, fixed arguments
            [sys.executable, "-m", "benchmarks.floor", "worker", self.database_url, self.redis_url]
        )

    def finished(self) -> int:
        row = self.connection.execute(
            "SELECT count(*) FROM bench_floor_jobs WHERE status = 'done'"
        ).fetchone()
        return int(row[0]) if row else 0


def work(database_url: str, redis_url: str) -> None:
    """Claim, run and complete until SIGTERM; idle, wait for a notification."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute(f"LISTEN {CHANNEL}")
        while True:
            rows = connection.execute(CLAIM, [CLAIM_BATCH]).fetchall()
            if not rows:
                for _ in connection.notifies(timeout=1.0, stop_after=1):
                    pass
                continue
            for _id, type, payload in rows:
                if type == "probe":
                    record_start(redis_url, payload, time.time())
            connection.execute(COMPLETE, [[row[0] for row in rows]])


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if sys.argv[1:2] == ["worker"]:
        work(sys.argv[2], sys.argv[3])
