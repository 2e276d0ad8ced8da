"""A job's dependency graph around it: its upstream jobs (what it waits for) and downstream
jobs (what waits for it), each direction walked breadth-first to a bounded depth and node
count, for `GET /api/v1/jobs/{id}/graph` and Job Detail's drawing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef

from .display import display_state
from .models import Job, JobDependency

DEFAULT_DEPTH = 3
MAX_DEPTH = 10
# Past this many jobs the walk stops, and the graph says it was cut.
MAX_NODES = 200


@dataclass(frozen=True)
class Node:
    id: uuid.UUID
    type: str
    status: str
    in_dlq: bool
    display_state: str
    # Pending on an upstream job that sits in the dead-letter queue: it waits until that
    # one is retried (and completes) or purged (which cancels this one).
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
    for upstream in (True, False):
        frontier = [job_id]
        for step in range(1, depth + 2):
            reached = [n for n in _neighbours(frontier, upstream) if n not in levels]
            if not reached:
                break
            if step > depth or len(levels) + len(reached) > MAX_NODES:
                truncated = True
                reached = reached[: max(0, MAX_NODES - len(levels))] if step <= depth else []
            for found in reached:
                levels[found] = -step if upstream else step
            frontier = reached
            if not frontier:
                break
    ids = list(levels)
    dlq_upstream = JobDependency.objects.filter(job_id=OuterRef("pk"), depends_on__in_dlq=True)
    rows = (
        Job.objects.filter(id__in=ids)
        .annotate(waiting_on_dlq=Exists(dlq_upstream))
        .values("id", "type", "status", "in_dlq", "pending_dependencies", "waiting_on_dlq")
    )
    nodes = sorted(
        (
            Node(
                id=row["id"],
                type=row["type"],
                status=row["status"],
                in_dlq=row["in_dlq"],
                display_state=display_state(
                    row["status"], row["in_dlq"], row["pending_dependencies"]
                ).name,
                waiting_on_dlq=row["waiting_on_dlq"] and row["status"] == "pending",
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
