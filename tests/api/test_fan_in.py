"""Fan-in: `depends_on` as a list, a job runs once every upstream job completed, a cancelled
or purged upstream cancels its dependents with a reason, a DLQ upstream keeps them waiting
(visibly), and GET /jobs/{id}/graph."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs import state
from jobs.models import Job, Worker

from .conftest import claim_one

JOBS = "/api/v1/jobs"


def create(client: Any, **fields: Any) -> dict[str, Any]:
    response = client.post(
        JOBS, {"type": "noop", "payload": {}, "priority": 2, **fields}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def finish(worker: Worker, job_id: str) -> state.CompletionReport:
    claimed = claim_one(worker, job_id)
    return state.complete(
        [state.Success(claimed.id, claimed.attempt_id, None, timezone.now())], worker.id
    )


def claimable(job_id: str) -> bool:
    return Job.objects.filter(id=job_id, status="pending", pending_dependencies=0).exists()


@pytest.mark.django_db
def test_a_job_waits_for_every_upstream_job_in_its_list(operator_client, worker):
    a, b = create(operator_client), create(operator_client)
    joined = create(operator_client, depends_on=[a["id"], b["id"], a["id"]])
    assert (joined["depends_on"], joined["upstream_ids"]) == (a["id"], [a["id"], b["id"]])
    finish(worker, a["id"])
    assert not claimable(joined["id"])
    assert finish(worker, b["id"]).released == [uuid.UUID(joined["id"])]
    assert claimable(joined["id"])
    # One id, as before fan-in: the same answer as ever, plus the list of one.
    single = create(operator_client, depends_on=a["id"])
    assert (single["depends_on"], single["upstream_ids"]) == (a["id"], [a["id"]])
    assert claimable(single["id"])  # its upstream job already completed


@pytest.mark.django_db
def test_a_bad_list_is_a_400_naming_each_bad_id(operator_client):
    a = create(operator_client)
    cancelled = state.cancel(uuid.UUID(create(operator_client)["id"]))
    missing = str(uuid.uuid4())
    response = operator_client.post(
        JOBS,
        {"type": "noop", "payload": {}, "priority": 2,
         "depends_on": [a["id"], missing, cancelled["id"]]},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json()["error"]["details"]["depends_on"] == [
        f"No job with id {missing}.",
        f"Job {cancelled['id']} is cancelled; it will never complete.",
    ]
    for bad in ([], ["nope"]):
        response = operator_client.post(
            JOBS, {"type": "noop", "payload": {}, "priority": 2, "depends_on": bad}, format="json"
        )
        assert response.status_code == 400 and "depends_on" in response.json()["error"]["details"]
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_cancelling_or_purging_an_upstream_job_cancels_its_dependents_with_a_reason(
    operator_client, job_in_state
):
    a = create(operator_client)
    dead = job_in_state("dlq")
    joined = create(operator_client, depends_on=[a["id"], dead["id"]])
    # A dead letter upstream keeps it waiting, and says so.
    graph = operator_client.get(f"{JOBS}/{joined['id']}/graph").json()
    node = next(n for n in graph["nodes"] if n["id"] == joined["id"])
    assert (node["display_state"], node["waiting_on_dlq"]) == ("blocked", True)
    assert operator_client.delete(f"{JOBS}/{dead['id']}/purge").status_code == 204
    after = operator_client.get(f"{JOBS}/{joined['id']}").json()
    assert after["status"] == "cancelled"
    assert after["last_error"] == (
        f"Upstream job {dead['id']} was purged from the dead-letter queue"
    )
    # Further down, each names its own upstream as the cascade left it: cancelled.
    dead_again = job_in_state("dlq")
    middle = create(operator_client, depends_on=[dead_again["id"]])
    below = create(operator_client, depends_on=[middle["id"]])
    assert operator_client.delete(f"{JOBS}/{dead_again['id']}/purge").status_code == 204
    reasons = [
        operator_client.get(f"{JOBS}/{job['id']}").json()["last_error"] for job in (middle, below)
    ]
    assert reasons == [
        f"Upstream job {dead_again['id']} was purged from the dead-letter queue",
        f"Upstream job {middle['id']} was cancelled",
    ]
    other = create(operator_client, depends_on=[a["id"]])
    operator_client.post(f"{JOBS}/{a['id']}/cancel")
    after = operator_client.get(f"{JOBS}/{other['id']}").json()
    assert (after["status"], after["last_error"]) == (
        "cancelled",
        f"Upstream job {a['id']} was cancelled",
    )


@pytest.mark.django_db
def test_the_graph_walks_both_ways_to_the_depth_asked(operator_client):
    root = create(operator_client)
    middle = [create(operator_client, depends_on=root["id"]) for _ in range(3)]
    last = create(operator_client, depends_on=[m["id"] for m in middle])
    after = create(operator_client, depends_on=last["id"])

    graph = operator_client.get(f"{JOBS}/{last['id']}/graph").json()
    levels = {n["id"]: n["level"] for n in graph["nodes"]}
    assert levels == {root["id"]: -2, **{m["id"]: -1 for m in middle}, last["id"]: 0,
                      after["id"]: 1}  # fmt: skip
    assert len(graph["edges"]) == 7 and graph["truncated"] is False
    assert {"upstream": root["id"], "downstream": middle[0]["id"]} in graph["edges"]

    near = operator_client.get(f"{JOBS}/{last['id']}/graph?depth=1").json()
    assert root["id"] not in {n["id"] for n in near["nodes"]} and near["truncated"] is True
    for bad in ("0", "11", "x"):
        response = operator_client.get(f"{JOBS}/{last['id']}/graph?depth={bad}")
        assert response.status_code == 400 and "depth" in response.json()["error"]["details"]
    assert operator_client.get(f"{JOBS}/{uuid.uuid4()}/graph").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_upstream_jobs_completing_at_once_release_their_dependent_exactly_once():
    racers = 6
    now = timezone.now()
    workers = [
        Worker.objects.create(hostname="w", pid=i, started_at=now, heartbeat_at=now)
        for i in range(racers)
    ]
    upstream = [state.enqueue("noop", {}) for _ in range(racers)]
    joined = state.enqueue("noop", {}, depends_on=[uuid.UUID(u["id"]) for u in upstream])
    Job.objects.filter(id__in=[u["id"] for u in upstream]).update(run_at=now - timedelta(minutes=1))
    claims = [
        state.claim(w.id, 1, [uuid.UUID(u["id"])])[0]
        for w, u in zip(workers, upstream, strict=True)
    ]
    start = threading.Barrier(racers)
    released: list[list[uuid.UUID]] = []

    def complete(claim: state.ClaimedJob, worker: Worker) -> None:
        try:
            start.wait()
            success = state.Success(claim.id, claim.attempt_id, None, timezone.now())
            released.append(state.complete([success], worker.id).released)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=complete, args=pair) for pair in zip(claims, workers, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(len(r) for r in released) == [0] * (racers - 1) + [1]
    assert claimable(joined["id"])
