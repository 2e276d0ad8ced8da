"""GET /jobs/{id}/explain and /jobs/{id}/graph at the edges a workflow user meets: the
upstream jobs listed in the order the job names them, a job of a paused queue shown paused
in the graph as everywhere else, and a fan-in's own dependents kept in its graph."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from jobs import queues, state

JOBS = "/api/v1/jobs"


def ids(*jobs: dict[str, Any]) -> list[uuid.UUID]:
    return [uuid.UUID(job["id"]) for job in jobs]


def test_explain_lists_the_upstream_jobs_in_the_order_the_job_names_them(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    """As `upstream_ids` does, and so the sentence names the first five of that order,
    whatever happened to the upstream rows since (here: some ran and completed)."""
    upstream = [job_in_state("pending") for _ in range(4)]
    upstream += [job_in_state("completed"), job_in_state("processing")]
    upstream += [job_in_state("dlq"), job_in_state("failed")]
    given = [upstream[i] for i in (6, 2, 7, 0, 4, 5, 1, 3)]
    job = state.enqueue("noop", {}, depends_on=ids(*given))
    assert job["upstream_ids"] == [u["id"] for u in given]

    answer = viewer_client.get(f"{JOBS}/{job['id']}/explain").json()
    assert [u["id"] for u in answer["details"]["upstream"]] == job["upstream_ids"]
    assert [u["display_state"] for u in answer["details"]["upstream"]] == [
        "dlq", "pending", "retrying", "pending", "completed", "processing", "pending", "pending"
    ]  # fmt: skip
    waiting = [u for u in given if u["id"] != upstream[4]["id"]]
    named = answer["message"].split(": ", 1)[1]
    assert [part.split(" ")[1] for part in named.split(", ")[:5]] == [
        u["id"][-8:] for u in waiting[:5]
    ]


def test_the_graph_shows_a_job_waiting_in_a_paused_queue_as_paused(
    viewer_client: APIClient,
) -> None:
    """Explain, the ledger and Job Detail's pill say "paused"; the graph said "pending"."""
    queues.pause("reports")
    upstream = state.enqueue("noop", {}, queue="reports")
    job = state.enqueue("noop", {}, depends_on=ids(upstream))

    explained = viewer_client.get(f"{JOBS}/{job['id']}/explain").json()["details"]["upstream"]
    assert explained[0]["display_state"] == "paused"
    graph = viewer_client.get(f"{JOBS}/{job['id']}/graph").json()
    shown = {node["id"]: node["display_state"] for node in graph["nodes"]}
    assert shown == {upstream["id"]: "paused", job["id"]: "blocked"}

    queues.resume("reports")
    graph = viewer_client.get(f"{JOBS}/{job['id']}/graph").json()
    assert {node["id"]: node["display_state"] for node in graph["nodes"]}[upstream["id"]] == (
        "pending"
    )


def test_a_fan_in_past_the_node_cap_keeps_its_own_dependents_in_its_graph(
    viewer_client: APIClient,
) -> None:
    """The walk went all the way up before it went down: 250 upstream jobs filled the 200
    jobs, and the graph of a fan-in's join never showed what waits on it. Nearer jobs come
    first, each way, and neither way takes the other's half of the room."""
    upstream = state.enqueue_many([state.JobSpec("noop", {"n": n}) for n in range(250)])
    join = state.enqueue("noop", {}, depends_on=ids(*upstream))
    below = state.enqueue("noop", {}, depends_on=ids(join))
    further = state.enqueue("noop", {}, depends_on=ids(below))

    graph = viewer_client.get(f"{JOBS}/{join['id']}/graph").json()
    levels = {node["id"]: node["level"] for node in graph["nodes"]}
    assert len(levels) == 200 and graph["truncated"] is True
    assert levels[below["id"]] == 1 and further["id"] not in levels  # no room left for it
    assert sorted(levels.values()).count(-1) == 198
    assert {"upstream": join["id"], "downstream": below["id"]} in graph["edges"]

    # A fan-out past the cap, seen from its root, keeps the root's upstream job.
    root = state.enqueue("noop", {}, depends_on=ids(join))
    fan_out = [state.enqueue("noop", {}, depends_on=ids(root)) for _ in range(210)]
    graph = viewer_client.get(f"{JOBS}/{root['id']}/graph?depth=1").json()
    levels = {node["id"]: node["level"] for node in graph["nodes"]}
    assert len(levels) == 200 and graph["truncated"] is True
    assert levels[join["id"]] == -1
    assert sum(level == 1 for level in levels.values()) == 198
    assert {fan_out[0]["id"], fan_out[197]["id"]} <= set(levels)


def test_explain_says_why_a_dependent_was_cancelled(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    """A dependent cancelled with its upstream job (purged, here) said only "It was
    cancelled at ..."; its `last_error` named the upstream job. A job that never started has
    no other error than its cancel's; one that ran keeps its last failure there, which is no
    reason for the cancel, and is not given as one."""
    dead = job_in_state("dlq")
    job = state.enqueue("noop", {}, depends_on=ids(dead))
    state.purge(ids(dead)[0])

    answer = viewer_client.get(f"{JOBS}/{job['id']}/explain").json()
    assert answer["reason"] == "cancelled"
    assert answer["message"].startswith("It was cancelled at ")
    assert answer["message"].endswith(
        f": Upstream job {dead['id']} was purged from the dead-letter queue."
    )
    assert answer["details"] == {
        "cancel_reason": f"Upstream job {dead['id']} was purged from the dead-letter queue"
    }

    by_hand = state.cancel(ids(job_in_state("pending"))[0], reason="Not needed any more")
    answer = viewer_client.get(f"{JOBS}/{by_hand['id']}/explain").json()
    assert answer["message"].endswith(": Not needed any more.")
    retrying = job_in_state("failed")
    state.cancel(ids(retrying)[0])
    answer = viewer_client.get(f"{JOBS}/{retrying['id']}/explain").json()
    assert ("boom" not in answer["message"], answer["details"]) == (True, {})
