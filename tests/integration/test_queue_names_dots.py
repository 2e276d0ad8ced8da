"""A queue's name is a segment of the URLs that address it (`/api/v1/queues/{name}/pause`,
the console's queue pages), and "." and ".." are the segments clients and proxies
normalise away: a queue named only with dots could be filled but never paused, resumed or
read. Every place a queue is named refuses such a name, with the rule, on the field."""

from __future__ import annotations

import pytest
from django.core.management import CommandError
from django.utils import timezone

from jobs import queue_names, queues, state
from jobs.models import Job, Limit, Queue
from tests.console.helpers import login, text
from worker.management.commands.runworker import Command as RunWorker

pytestmark = pytest.mark.django_db

DOTS = [".", "..", "..."]


def assert_validation_error(response, field: str) -> list[str]:
    """The api.md error: 400 `validation_error`, a sentence, `details` naming `field` only."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == "validation_error"
    assert isinstance(error["message"], str) and error["message"]
    assert list(error["details"]) == [field]
    return error["details"][field]


@pytest.mark.parametrize("name", DOTS)
def test_the_rule_refuses_a_name_of_dots_alone_and_keeps_dots_among_other_characters(name):
    assert queue_names.name_errors(name) == [f"A queue name is {queue_names.NAME_RULE}"]
    for fine in (f"a{name}", f"{name}b", f"{name}-", "v1.2", ".hidden", "a..b"):
        assert queue_names.name_errors(fine) == []


@pytest.mark.parametrize("name", DOTS)
def test_the_api_refuses_a_job_in_a_queue_named_only_with_dots(operator_client, name):
    response = operator_client.post(
        "/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 2, "queue": name}, format="json"
    )
    assert assert_validation_error(response, "queue")
    assert not Job.objects.exists()


def test_the_api_refuses_such_a_queue_in_a_batch_too(operator_client):
    response = operator_client.post(
        "/api/v1/jobs/batch",
        {"jobs": [{"type": "noop", "payload": {}, "priority": 2, "queue": ".."}]},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "validation_error"
    assert "queue" in str(response.json()["error"]["details"])
    assert not Job.objects.exists()


@pytest.mark.parametrize("name", ["a b", "ü-queue", "a\\b", "a/b", "q" * 101, "", ".."])
def test_the_api_says_the_rule_a_queue_name_breaks(operator_client, name):
    # It answered "This value does not match the required pattern.", the rule unsaid.
    rule = "A queue name is 1 to 100 letters, digits, '_', '-', '.' or ':', not dots alone."
    job = {"type": "noop", "payload": {}, "priority": 2, "queue": name}
    response = operator_client.post("/api/v1/jobs", job, format="json")
    assert assert_validation_error(response, "queue") == [rule]
    response = operator_client.post("/api/v1/jobs/batch", {"jobs": [job]}, format="json")
    assert assert_validation_error(response, "jobs.0.queue") == [rule]
    assert not Job.objects.exists()


@pytest.mark.parametrize("name", DOTS)
def test_enqueue_refuses_a_queue_named_only_with_dots(name):
    with pytest.raises(state.JobValidationError) as refused:
        state.enqueue("noop", {}, queue=name)
    assert refused.value.details == {"queue": [f"A queue name is {queue_names.NAME_RULE}"]}
    assert not Job.objects.exists()
    # A dot among other characters is still a queue name.
    assert state.enqueue("noop", {}, queue="v1.2")["queue"] == "v1.2"


@pytest.mark.parametrize("name", DOTS)
def test_runworker_refuses_to_serve_a_queue_named_only_with_dots(name):
    parser = RunWorker().create_parser("manage.py", "runworker")
    for arguments in (["--queues", name], ["--queues", f"emails,{name}"], ["--queue", f"{name}=2"]):
        with pytest.raises(CommandError, match="A queue name is"):
            parser.parse_args(arguments)
    assert parser.parse_args(["--queues", "v1.2"]).queues == ("v1.2",)


@pytest.mark.parametrize("name", DOTS)
def test_the_pause_and_resume_routes_refuse_a_queue_named_only_with_dots(operator_client, name):
    # The test client sends the path as written, as a client that does not normalise would.
    for action in ("pause", "resume"):
        response = operator_client.post(f"/api/v1/queues/{name}/{action}")
        assert assert_validation_error(response, "name")
    with pytest.raises(state.JobValidationError) as refused:
        queues.pause(name)
    assert list(refused.value.details) == ["name"]
    assert not Queue.objects.exists()


def test_a_limit_on_a_queue_named_only_with_dots_is_refused(operator_client):
    response = operator_client.put("/api/v1/limits/queue/..", {"max_running": 1}, format="json")
    assert assert_validation_error(response, "name")
    assert not Limit.objects.exists()


def test_the_console_new_job_form_refuses_a_queue_named_only_with_dots(operator):
    response = login(operator).post(
        "/jobs/new", {"type": "noop", "payload": "{}", "priority": "2", "queue": ".."}
    )
    assert response.status_code == 400
    body = text(response)
    assert "A queue name is" in body[body.index('id="field-queue"') :].split('<div class="field')[0]
    assert not Job.objects.exists()


def test_a_limit_stored_on_such_a_name_before_the_rule_can_still_be_removed(superuser_client):
    # Migration 0054 rewrote no row: a limit on ".." set before it stays in force. The admin
    # removes it through `queues.remove_limit`, which refused the name: a 500.
    stored = Limit.objects.create(
        scope="queue", name="..", max_running=1, updated_at=timezone.now()
    )
    response = superuser_client.post(f"/admin/jobs/limit/{stored.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Limit.objects.exists()
    # A name of dots alone that names no stored limit is refused as before.
    with pytest.raises(state.JobValidationError):
        queues.remove_limit("queue", "..")
