"""A job's dependency graph around it: its upstream jobs (what it waits for) and downstream
jobs (what waits for it), each direction walked breadth-first to a bounded depth and node
count, for `GET /api/v1/jobs/{id}/graph` and Job Detail's drawing; and the walk up from
blocked jobs to the dead letters that hold them up (`held_up`), which marks the graph's jobs
and which `jobs.explain` names."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection

from .display import display_state
from .models import Job, JobDependency
from .queues import paused_queues
from .state import MAX_UPSTREAM

DEFAULT_DEPTH = 3
MAX_DEPTH = 10
# Past this many jobs the walk stops, and the graph says it was cut.
MAX_NODES = 200
# The walk up to the dead letters that hold blocked jobs up reads at most this many
# unfinished upstream jobs (of all the jobs of a graph together), a fan-in's worth: fan-ins
# over fan-ins grow fast. Explain then says it may not have seen them all; the graph marks
# the jobs it found held up.
UPSTREAM_WALKED = MAX_UPSTREAM

# The unfinished jobs upstream of the jobs `job_ids`, transitively: what their
# `pending_dependencies` count (an upstream job not yet completed), then what theirs count.
# Only a blocked job has unfinished upstream jobs (every other state ran, or may run, because
# its upstream completed), so the walk goes through blocked jobs and stops at the first job
# of any other state; the dead letters among them are what holds the jobs up. UNION visits a
# job once, however many paths lead to it; the LIMIT stops the recursion there (PostgreSQL
# computes a recursive query only as far as it is read).
_UNFINISHED_UPSTREAM = """
WITH RECURSIVE unfinished(id) AS (
    SELECT dep.depends_on_id
    FROM job_dependencies dep JOIN jobs up ON up.id = dep.depends_on_id
    WHERE dep.job_id = ANY(%(job_ids)s) AND up.status <> 'completed'
    UNION
    SELECT dep.depends_on_id
    FROM unfinished
    JOIN job_dependencies dep ON dep.job_id = unfinished.id
    JOIN jobs up ON up.id = dep.depends_on_id
    WHERE up.status <> 'completed'
), walked AS (
    SELECT id FROM unfinished LIMIT %(limit)s
)
SELECT j.id, j.type, j.in_dlq, j.created_at FROM walked JOIN jobs j ON j.id = walked.id
"""


@dataclass(frozen=True)
class HeldUp:
    """The dead letters that hold a blocked job up, directly or through the blocked jobs
    between (`{"id", "type"}` each, oldest first), and whether the walk stopped at
    `UPSTREAM_WALKED` unfinished upstream jobs before it saw them all."""

    dead_letters: list[dict[str, str]]
    truncated: bool


def held_up(job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, HeldUp]:
    """What holds each of the blocked jobs `job_ids` up (`HeldUp`), found by one walk over
    the unfinished jobs upstream of them all. A walk of its own for each of a graph's jobs
    read a fan-in again for each job below it: 2.1 s for 199 jobs under a fan-in of 1,000,
    45 ms as one walk. While the walk sees them all, each job's answer is the one its own
    walk gives."""
    starts = list(dict.fromkeys(job_ids))
    if not starts:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_UNFINISHED_UPSTREAM, {"job_ids": starts, "limit": UPSTREAM_WALKED + 1})
        rows = cursor.fetchall()
    truncated = len(rows) > UPSTREAM_WALKED
    dead = {id_: (created_at, str(id_), type_) for id_, type_, in_dlq, created_at in rows if in_dlq}
    if len(starts) == 1:
        # Every job the walk read lies above the one it started from.
        reached = {starts[0]: set(dead)}
    else:
        reached = _dead_letters_above(starts, {row[0] for row in rows}, dead)
    return {
        job_id: HeldUp(
            [{"id": id_, "type": type_} for _, id_, type_ in sorted(dead[d] for d in found)],
            truncated,
        )
        for job_id, found in reached.items()
    }


def _dead_letters_above(
    starts: list[uuid.UUID], walked: set[uuid.UUID], dead: Iterable[uuid.UUID]
) -> dict[uuid.UUID, set[uuid.UUID]]:
    """The dead letters above each of `starts` among the unfinished upstream jobs `walked`,
    by the edges between them."""
    upstream: dict[uuid.UUID, list[uuid.UUID]] = {}
    edges = JobDependency.objects.filter(
        job_id__in=walked.union(starts), depends_on_id__in=walked
    ).values_list("job_id", "depends_on_id")
    for job_id, depends_on_id in edges:
        upstream.setdefault(job_id, []).append(depends_on_id)
    # A dead letter holds up what lies below it; the jobs above it completed.
    above: dict[uuid.UUID, set[uuid.UUID]] = {job_id: {job_id} for job_id in dead}
    # Depth first, without recursion: a chain of blocked jobs may be 1,000 long. A job names
    # its upstream jobs when it is created, so no path leads back to one.
    for start in starts:
        stack = [start]
        while stack:
            job_id = stack[-1]
            if job_id in above:
                stack.pop()
                continue
            ups = upstream.get(job_id, [])
            if unread := [up for up in ups if up not in above]:
                stack.extend(unread)
                continue
            above[job_id] = set().union(*(above[up] for up in ups))
            stack.pop()
    return {job_id: above[job_id] for job_id in starts}


@dataclass(frozen=True)
class Node:
    id: uuid.UUID
    type: str
    status: str
    in_dlq: bool
    display_state: str
    # Blocked by a job in the dead-letter queue, directly or through the blocked jobs between
    # (`held_up`, as explain names them): it waits until that one is retried (and completes)
    # or purged (which cancels this one).
    waiting_on_dlq: bool
    # Steps from the job the graph is about: negative upstream, positive downstream.
    level: int


@dataclass(frozen=True)
class Graph:
    job_id: uuid.UUID
    depth: int
    nodes: list[Node]
    # (upstream, downstream) pairs between nodes of the graph.
    edges: list[tuple[uuid.UUID, uuid.UUID]]
    truncated: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": str(self.job_id),
            "depth": self.depth,
            "truncated": self.truncated,
            "nodes": [
                {
                    "id": str(n.id),
                    "type": n.type,
                    "status": n.status,
                    "in_dlq": n.in_dlq,
                    "display_state": n.display_state,
                    "waiting_on_dlq": n.waiting_on_dlq,
                    "level": n.level,
                }
                for n in self.nodes
            ],
            "edges": [{"upstream": str(u), "downstream": str(d)} for u, d in self.edges],
        }


def _neighbours(frontier: list[uuid.UUID], upstream: bool) -> list[uuid.UUID]:
    near, far = ("job_id", "depends_on_id") if upstream else ("depends_on_id", "job_id")
    edges = JobDependency.objects.filter(**{f"{near}__in": frontier})
    return list(edges.order_by(far).values_list(far, flat=True).distinct())


def job_graph(job_id: uuid.UUID, depth: int = DEFAULT_DEPTH) -> Graph | None:
    """The graph around `job_id` up to `depth` steps each way; None for an unknown job.
    `truncated` when a job at the edge has more beyond it, or the node cap was reached."""
    if not Job.objects.filter(id=job_id).exists():
        return None
    levels: dict[uuid.UUID, int] = {job_id: 0}
    truncated = False
    # Both ways a step at a time, so the nearer jobs come first: walked all the way up
    # before down, a fan-in's 1,000 upstream jobs filled the graph, and what waits on the
    # job itself was left out.
    frontiers = {True: [job_id], False: [job_id]}
    for step in range(1, depth + 2):
        found = {
            upstream: [n for n in _neighbours(frontier, upstream) if n not in levels]
            for upstream, frontier in frontiers.items()
            if frontier
        }
        if step > depth:
            truncated = truncated or any(found.values())
            break
        room = MAX_NODES - len(levels)
        ups, downs = len(found.get(True, [])), len(found.get(False, []))
        if ups + downs > room:
            truncated = True
            # Neither way takes the other's half of the room.
            kept_up = min(ups, max(room // 2, room - downs))
            kept = {True: kept_up, False: min(downs, room - kept_up)}
            found = {upstream: reached[: kept[upstream]] for upstream, reached in found.items()}
        frontiers = {True: [], False: []}
        for upstream, reached in found.items():
            for one in reached:
                levels[one] = -step if upstream else step
            frontiers[upstream] = reached
        if not any(frontiers.values()):
            break
    ids = list(levels)
    rows = list(
        Job.objects.filter(id__in=ids).values(
            "id", "type", "status", "in_dlq", "pending_dependencies", "queue"
        )
    )
    paused = paused_queues()
    shown = {
        row["id"]: display_state(
            row["status"], row["in_dlq"], row["pending_dependencies"], row["queue"] in paused
        )
        for row in rows
    }
    # Its dead letters may lie past the graph's depth: the walk goes up as far as explain's.
    blocked = [job for job, shown_as in shown.items() if shown_as.blocked]
    held = held_up(blocked)
    if len(blocked) > 1 and job_id in held and held[job_id].truncated:
        # The walk for all of them stopped short: the job the graph is about is marked as
        # explain names its dead letters (beside it on Job Detail), by a walk of its own.
        held[job_id] = held_up([job_id])[job_id]
    nodes = sorted(
        (
            Node(
                id=row["id"],
                type=row["type"],
                status=row["status"],
                in_dlq=row["in_dlq"],
                display_state=shown[row["id"]].name,
                waiting_on_dlq=row["id"] in held and bool(held[row["id"]].dead_letters),
                level=levels[row["id"]],
            )
            for row in rows
        ),
        key=lambda n: (n.level, str(n.id)),
    )
    edges = sorted(
        JobDependency.objects.filter(job_id__in=ids, depends_on_id__in=ids).values_list(
            "depends_on_id", "job_id"
        ),
        key=lambda e: (str(e[0]), str(e[1])),
    )
    return Graph(job_id, depth, nodes, edges, truncated)
