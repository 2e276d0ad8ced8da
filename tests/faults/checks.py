"""The invariant checker of `make faults`, and its table.

What must hold, fault by fault:
- every answer is a success, or a 503 with Retry-After while PostgreSQL is away; never a
  500, never no answer at all;
- every job finished: each accepted one (and any other in the database) is `completed`;
- each job's handler side effect (a line `count_run` appends to a file, outside PostgreSQL
  and Redis) happened once, written by the attempt that succeeded. The only other lines
  allowed are those of the documented at-least-once cases, each named: an attempt of a
  worker killed with SIGKILL (its handler may have finished before the kill), and an attempt
  of a worker cut off from PostgreSQL that was rescued, whose late outcome the fencing token
  refused.

Requests are counted in the window in which they were answered (a request sent just before
a fault may be answered by it), jobs in the window in which their first attempt ended (a
lost attempt ends when it is rescued, within its fault's window), or began if it never
ended, or in which they were created if they never started.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .load import Answer

KILLED = "kill -9: the handler finished before the kill"
FENCED = "cut off: the late outcome was refused"


@dataclass
class Window:
    fault: str
    # PostgreSQL is away during this fault: 503 (with Retry-After) is the right answer.
    database_down: bool
    start: float
    end: float = math.inf
    note: str = ""
    # What went wrong in the run itself (a wait that gave up, the database refusing the suite).
    problems: list[str] = field(default_factory=list)

    def __contains__(self, moment: float) -> bool:
        return self.start <= moment < self.end


@dataclass
class Row:
    window: Window
    requests: int = 0
    ok: int = 0
    unavailable: int = 0
    wrong: Counter[str] = field(default_factory=Counter)  # answers that must not happen
    jobs: int = 0
    once: int = 0
    again: Counter[str] = field(default_factory=Counter)  # documented at-least-once runs
    twice: int = 0  # a handler ran again outside the documented cases
    unfinished: int = 0

    @property
    def holds(self) -> bool:
        return not (self.wrong or self.twice or self.unfinished or self.window.problems)


@dataclass
class Report:
    rows: list[Row]
    lost: int  # accepted (201) but not in the database at all

    @property
    def holds(self) -> bool:
        return not self.lost and all(row.holds for row in self.rows)


def check(
    windows: list[Window],
    answers: list[Answer],
    effects: Path,
    *,
    killed: set[str],
    fenced: set[str],
) -> Report:
    from jobs.models import Job, JobAttempt

    rows = [Row(window) for window in windows]

    def row_at(moment: float) -> Row:
        return next((row for row in rows if moment in row.window), rows[0])

    for answer in answers:
        row = row_at(answer.at)
        row.requests += 1
        if 200 <= answer.status < 300:
            row.ok += 1
        elif answer.status == 503 and answer.retry_after and row.window.database_down:
            row.unavailable += 1
        elif answer.status == 0:
            row.wrong["no answer"] += 1
        elif answer.status == 503 and not answer.retry_after:
            row.wrong["503 without Retry-After"] += 1
        else:
            row.wrong[f"{answer.status}"] += 1

    lines: dict[str, list[str]] = defaultdict(list)
    if effects.exists():
        for line in effects.read_text().splitlines():
            job_id, attempt_id = line.split()
            lines[job_id].append(attempt_id)
    attempts: dict[str, list[JobAttempt]] = defaultdict(list)
    for attempt in JobAttempt.objects.order_by("attempt_number"):
        attempts[str(attempt.job_id)].append(attempt)

    known = set()
    for job in Job.objects.only("id", "status", "created_at"):
        job_id = str(job.id)
        known.add(job_id)
        tries = attempts[job_id]
        first = tries[0] if tries else None
        moment = job.created_at if first is None else first.finished_at or first.started_at
        row = row_at(moment.timestamp())
        row.jobs += 1
        if job.status != "completed":
            row.unfinished += 1
            continue
        by_id = {str(a.id): a for a in tries}
        succeeded = [str(a.id) for a in tries if a.status == "succeeded"]
        written = Counter(lines[job_id])
        if len(succeeded) != 1 or written[succeeded[0]] != 1:
            row.twice += 1
            continue
        extra = [by_id.get(attempt_id) for attempt_id in written if attempt_id != succeeded[0]]
        excuses = [_excuse(attempt, killed, fenced) for attempt in extra]
        if None in excuses or sum(written.values()) != 1 + len(extra):
            row.twice += 1
        elif excuses:
            row.again.update(excuse for excuse in excuses if excuse)
        else:
            row.once += 1
    accepted = {answer.job_id for answer in answers if answer.job_id}
    return Report(rows, lost=len(accepted - known))


def _excuse(attempt: object, killed: set[str], fenced: set[str]) -> str | None:
    """The documented case that allows this lost attempt's handler to have run, if any."""
    from jobs.models import JobAttempt

    if not isinstance(attempt, JobAttempt) or attempt.error_type != "WorkerLost":
        return None
    worker = str(attempt.worker_id)
    if worker in killed:
        return KILLED
    if worker in fenced:
        return FENCED
    return None


def render(report: Report, *, drained: bool, minutes: float) -> str:
    header = (
        "fault",
        "requests",
        "2xx",
        "503",
        "wrong answers",
        "jobs",
        "ran once",
        "ran again (documented)",
        "ran twice",
        "unfinished",
        "verdict",
    )
    table = [header]
    for row in report.rows:
        wrong = ", ".join(f"{n} x {what}" for what, n in sorted(row.wrong.items())) or "0"
        table.append(
            (
                row.window.fault,
                str(row.requests),
                str(row.ok),
                str(row.unavailable),
                wrong,
                str(row.jobs),
                str(row.once),
                str(sum(row.again.values())),
                str(row.twice),
                str(row.unfinished),
                "holds" if row.holds else "BROKEN",
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    out = []
    for number, line in enumerate(table):
        out.append(" | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if number == 0:
            out.append("-+-".join("-" * width for width in widths))
    out.append("")
    for row in report.rows:
        for excuse, count in sorted(row.again.items()):
            out.append(f"{row.window.fault}: {count} ran again, {excuse}")
        for remark in [row.window.note, *row.window.problems]:
            if remark:
                out.append(f"{row.window.fault}: {remark}")
    if report.lost:
        out.append(f"{report.lost} accepted jobs are not in the database")
    if not drained:
        out.append("some jobs had not finished 3 minutes after the load stopped")
    verdict = "ALL INVARIANTS HOLD" if report.holds and drained else "INVARIANTS BROKEN"
    out.append(f"{verdict} ({minutes:.1f} min)")
    return "\n".join(out)
