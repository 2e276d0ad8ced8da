"""GET /jobs/{id}/graph marks each job held up by a dead letter, however many blocked jobs
lie between, as GET /jobs/{id}/explain names it, and Job Detail's drawing says so."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from jobs import state
from jobs.representation import short_id
from tests.console.helpers import login

JOBS = "/api/v1/jobs"


def marks(client: APIClient, job_id: Any, depth: int = 3) -> dict[str, bool]:
    """`waiting_on_dlq` of each job of the graph around `job_id`, by id."""
    response = client.get(f"{JOBS}/{job_id}/graph?depth={depth}")
    assert response.status_code == 200
    return {node["id"]: node["waiting_on_dlq"] for node in response.json()["nodes"]}


def held_up_by(client: APIClient, job_id: str) -> list[str]:
    """The dead letters explain names for the job."""
    details = client.get(f"{JOBS}/{job_id}/explain").json()["details"]
    return [dead["id"] for dead in details.get("dead_letters", [])]


def after(*upstream: dict[str, Any]) -> dict[str, Any]:
    return state.enqueue("noop", {}, depends_on=[uuid.UUID(u["id"]) for u in upstream])


def test_jobs_steps_below_a_dead_letter_are_marked_as_explain_names_it(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    """A (in the DLQ) <- B <- D <- E: only B was marked; D and E, blocked by the same dead
    letter, read as waiting on nothing in particular."""
    dead = job_in_state("dlq")
    retrying = job_in_state("failed")
    middle = after(dead)
    job = after(middle)
    below = after(job)
    # Blocked too, but by a job that retries on its own: no dead letter holds it.
    elsewhere = after(retrying)
    join = after(job, elsewhere)

    graph = marks(viewer_client, job["id"])
    assert graph == {
        dead["id"]: False,
        middle["id"]: True,
        job["id"]: True,
        below["id"]: True,
        join["id"]: True,
    }
    assert marks(viewer_client, elsewhere["id"]) == {
        retrying["id"]: False,
        elsewhere["id"]: False,
        join["id"]: True,
    }
    # The dead letter counts where it lies past the graph's depth too, as for explain.
    assert marks(viewer_client, below["id"], depth=1) == {job["id"]: True, below["id"]: True}
    for node in graph:
        assert graph[node] == bool(held_up_by(viewer_client, node)), node

    state.retry_from_dlq(uuid.UUID(dead["id"]))
    assert not any(marks(viewer_client, job["id"]).values())


def test_the_graph_walks_up_once_for_all_its_jobs_and_as_far_as_explain(
    viewer_client: APIClient, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    """One walk for the graph's blocked jobs together, of at most the 1,000 unfinished
    upstream jobs explain's walk reads: a walk for each job read a fan-in again for each of
    the jobs below it. A dead letter past the bound is not marked; explain then says its
    own walk stopped too."""
    dead = job_in_state("dlq")
    upstream = state.enqueue_many([state.JobSpec("noop", {"n": n}) for n in range(999)])
    held = after(dead)
    fan_in = after(held, *upstream)
    root = state.enqueue("noop", {})
    below = [after(root, fan_in) for _ in range(20)]

    with CaptureQueriesContext(connection) as queries:
        graph = marks(viewer_client, root["id"], depth=1)
    assert sum("WITH RECURSIVE" in q["sql"] for q in queries.captured_queries) == 1
    # The walk reads the fan-in and its 1,000 upstream jobs, and stops before the dead letter
    # above one of them.
    assert graph == {root["id"]: False, **{job["id"]: False for job in below}}
    details = viewer_client.get(f"{JOBS}/{below[0]['id']}/explain").json()["details"]
    assert (details["dead_letters"], details["dead_letters_truncated"]) == ([], True)
    # From the fan-in it reads its 1,000 upstream jobs and then the dead letter, as explain's.
    assert marks(viewer_client, fan_in["id"], depth=1)[fan_in["id"]] is True
    assert held_up_by(viewer_client, fan_in["id"]) == [dead["id"]]


def test_job_detail_draws_the_jobs_a_dead_letter_holds_up_through_a_chain(
    viewer: Any, job_in_state: Callable[..., dict[str, Any]]
) -> None:
    """Job Detail's drawing reads the graph: each job held up says so in its box."""
    dead = job_in_state("dlq")
    middle = after(dead)
    job = after(middle)

    response = login(viewer).get(reverse("console:job-detail", args=[job["id"]]))
    assert response.status_code == 200
    page = response.content.decode()
    drawn = page.index('<svg class="job-graph"')
    graph = page[drawn : page.index("</svg>", drawn)]
    for held in (middle, job):
        assert f"{held['id']}: Blocked (waiting on a dead letter)</title>" in graph
        assert f"{short_id(held['id'])} · Blocked ⚠</text>" in graph
    assert f"{dead['id']}: DLQ</title>" in graph
