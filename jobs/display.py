"""How a job is shown to people: its display state, and its JSON in a bounded size.

An operator does not think in stored statuses: a failed job is either waiting for a retry
or a dead letter, and a pending job may be blocked behind its upstream job. `STATES` is the
one table of those display states: how each is derived from the row, its label, how a
sentence names it, the event that leads into it, and the operator actions it allows. The
console's templates, its JavaScript (handed the table with `json_script`) and the admin all
read it; the SQL guards of `jobs/sql/queries.sql` agree with its actions, and
tests/integration/test_display_states.py drives every action from every state to prove it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from .models import Job, JobStatus, Queue
from .queue_names import DEFAULT_QUEUE


class Action(StrEnum):
    """What an operator may do to one job (API, console, admin)."""

    CANCEL = "cancel"
    RETRY = "retry"
    PURGE = "purge"


@dataclass(frozen=True)
class DisplayState:
    name: str
    label: str
    # How a sentence names it: "it is now {phrase}".
    phrase: str
    # The row it stands for: the stored status, the DLQ flag, and whether upstream jobs are
    # still unfinished.
    status: str
    in_dlq: bool
    blocked: bool
    # The job is pending, not blocked, in a paused queue (`jobs.queues`).
    paused: bool
    # The event a job in this state last produced: the log feed's history shows it.
    event: str
    actions: tuple[Action, ...]

    def allows(self, action: str) -> bool:
        return action in self.actions


# fmt: off
_TABLE = (
    #            name          label         phrase ("it is now ...")
    #            status                in_dlq blocked paused event           actions
    DisplayState("pending",    "Pending",    "pending",
                 JobStatus.PENDING,    False, False, False, "job.created",  (Action.CANCEL,)),
    DisplayState("blocked",    "Blocked",    "waiting for its upstream job",
                 JobStatus.PENDING,    False, True,  False, "job.created",  (Action.CANCEL,)),
    DisplayState("paused",     "Paused",     "waiting in a paused queue",
                 JobStatus.PENDING,    False, False, True,  "job.created",  (Action.CANCEL,)),
    DisplayState("processing", "Processing", "processing",
                 JobStatus.PROCESSING, False, False, False, "job.started",  (Action.CANCEL,)),
    DisplayState("completed",  "Completed",  "completed",
                 JobStatus.COMPLETED,  False, False, False, "job.completed", ()),
    DisplayState("retrying",   "Retrying",   "waiting for a retry",
                 JobStatus.FAILED,     False, False, False, "job.retry_scheduled",
                 (Action.CANCEL,)),
    DisplayState("dlq",        "DLQ",        "in the dead-letter queue",
                 JobStatus.FAILED,     True,  False, False, "job.dlq_entry",
                 (Action.RETRY, Action.PURGE)),
    DisplayState("cancelled",  "Cancelled",  "cancelled",
                 JobStatus.CANCELLED,  False, False, False, "job.cancelled", ()),
)
# fmt: on

STATES: dict[str, DisplayState] = {shown.name: shown for shown in _TABLE}
_BY_ROW = {(shown.status, shown.in_dlq, shown.blocked, shown.paused): shown for shown in _TABLE}


def display_state(
    status: str, in_dlq: bool, pending_dependencies: int = 0, queue_paused: bool = False
) -> DisplayState:
    """The display state of a job row (a pending job with unfinished upstream is blocked;
    one that could run but whose queue is paused is paused)."""
    blocked = status == JobStatus.PENDING and pending_dependencies > 0
    paused = status == JobStatus.PENDING and not blocked and queue_paused
    return _BY_ROW[(str(status), in_dlq, blocked, paused)]


def job_display_state(job: Any) -> DisplayState:
    """The display state of a `Job` (or anything with its status, in_dlq and dependencies).
    Whether its queue is paused is read from `queue_paused` when the query annotated it
    (`with_queue_paused`), else asked of the database for a pending job."""
    queue_paused = getattr(job, "queue_paused", None)
    if queue_paused is None:
        queue_paused = job.status == JobStatus.PENDING and (
            Queue.objects.filter(name=getattr(job, "queue", DEFAULT_QUEUE), paused=True).exists()
        )
    return display_state(
        job.status, job.in_dlq, getattr(job, "pending_dependencies", 0), queue_paused
    )


def with_queue_paused(queryset: QuerySet[Job]) -> QuerySet[Job]:
    """`queryset` with each job's `queue_paused`, for `job_display_state` (one query for a
    page rather than one per pending job)."""
    return queryset.annotate(
        queue_paused=Exists(Queue.objects.filter(name=OuterRef("queue"), paused=True))
    )


def label_of(name: str) -> str:
    """The label of a display state, or of another status shown as a pill (an attempt's,
    a worker's): those read as their name, capitalised."""
    shown = STATES.get(name)
    return shown.label if shown else name.replace("_", " ").capitalize()


def table_for_script() -> dict[str, dict[str, Any]]:
    """The table as console.js reads it (`json_script`): label, row match and actions."""
    return {
        shown.name: {
            "label": shown.label,
            "status": shown.status,
            "in_dlq": shown.in_dlq,
            "blocked": shown.blocked,
            "paused": shown.paused,
            "actions": list(shown.actions),
        }
        for shown in _TABLE
    }


# --- text on a page ----------------------------------------------------------------------------

# Characters that reorder the text around them (bidirectional marks, embeddings, overrides and
# isolates): printed as they are, a value passes for another ("\u202eevil" reads "live").
# They are shown as their escapes, which JSON reads back as the same characters; what is
# stored keeps them.
_BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_BIDI_ESCAPES = {code: f"\\u{code:04x}" for code in _BIDI_CONTROLS}


def reveal_bidi(text: str) -> str:
    """`text` with each bidirectional control shown as its `\\uXXXX` escape."""
    return text.translate(_BIDI_ESCAPES)


def _dumps(value: Any, **options: Any) -> str:
    return reveal_bidi(json.dumps(value, ensure_ascii=False, **options))


def editable_json(value: Any) -> str:
    """The whole value as JSON to edit (indented, never elided): sent back unchanged, it
    parses to the same value."""
    return _dumps(value, indent=2)


# --- JSON on a page ----------------------------------------------------------------------------

# A payload or result is pretty-printed to this depth; deeper values are elided. Indentation
# grows with depth, so an unbounded depth makes a small deep payload a huge page (2 KB
# nested 1,000 deep was 1.6 MB).
SHOWN_JSON_DEPTH = 20
# ...and to this many characters; the raw JSON is one download away.
SHOWN_JSON_CHARS = 50_000


@dataclass(frozen=True)
class ShownJson:
    text: str
    truncated: bool


def shown_json(
    value: Any, *, max_depth: int = SHOWN_JSON_DEPTH, max_chars: int = SHOWN_JSON_CHARS
) -> ShownJson:
    """`json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)` while that stays
    within `max_depth` levels and `max_chars` characters; beyond them, elided, and said so.
    Bidirectional controls are shown as escapes (`reveal_bidi`)."""
    printer = _Printer(max_depth)
    pieces: list[str] = []
    size = 0
    for piece in printer.pieces(value, 0):
        if size + len(piece) > max_chars:
            pieces.append(piece[: max_chars - size] + " …")
            return ShownJson("".join(pieces), truncated=True)
        pieces.append(piece)
        size += len(piece)
    return ShownJson("".join(pieces), truncated=printer.elided)


class _Printer:
    # A generator, so a huge value costs only what is shown; recursion stops at max_depth.
    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.elided = False

    def pieces(self, value: Any, depth: int) -> Iterator[str]:
        if not (isinstance(value, dict | list) and value):
            yield _dumps(value)
            return
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        if depth >= self.max_depth:
            self.elided = True
            yield f"{opening}…{closing}"
            return
        inner = "\n" + "  " * (depth + 1)
        yield opening
        if isinstance(value, dict):
            for index, key in enumerate(sorted(value)):
                yield ("," if index else "") + inner + _dumps(key) + ": "
                yield from self.pieces(value[key], depth + 1)
        else:
            for index, item in enumerate(value):
                yield ("," if index else "") + inner
                yield from self.pieces(item, depth + 1)
        yield "\n" + "  " * depth + closing
