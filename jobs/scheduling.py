"""The scheduling rule: priority with aging, as a fixed virtual deadline per job.

engine.md seeds `score = max(0, priority - floor(minutes_waiting / 10) * 0.5)`, lower is more
urgent. Its steps make two jobs swap places back and forth as time passes, which no structure
with fixed keys can follow. The continuous form `priority - minutes_waiting / 20` goes through
the same anchor points and equals `(virtual_deadline - now) / 20 min`: at every moment it
orders jobs exactly as `virtual_deadline = ready_at + priority * 20 min` does, so the claim
and the worker's schedulers sort on the deadline, computed once per ready time.

The rule is the SQL function `scheduler_virtual_deadline` (`jobs/sql/schema.sql`), used by
every statement that makes a job ready; this is its Python twin, pinned equal to it by
tests/integration/test_schema_sql.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# What one priority level is worth in waiting time.
PRIORITY_WEIGHT = timedelta(minutes=20)


def virtual_deadline(priority: int, ready_at: datetime) -> datetime:
    """When a job ready at `ready_at` should run at the latest: earliest first wins."""
    return ready_at + priority * PRIORITY_WEIGHT
