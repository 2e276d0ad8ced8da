"""Every read refuses a query parameter it does not take, as the job lists always did: a
client that sends `GET /jobs/stats?type=noop` believes it counted one type's jobs, and a 200
answered as if the parameter were absent told it so. The routes and what each takes come from
the OpenAPI document, so that a route added later is checked without this file changing."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

API = "/api/v1"
UNKNOWN = "no_such_parameter"
# A string parameter's documented value where any word is not one.
STRING_VALUES = {"cursor": "first"}


@pytest.fixture
def filled_paths(operator_client, job_in_state) -> dict[str, str]:
    """Each path parameter of the document, as an object that exists names it."""
    job = job_in_state("pending")
    schedule = operator_client.post(
        f"{API}/jobs",
        {"type": "noop", "payload": {}, "priority": 2, "cron": "30 2 * * *"},
        format="json",
    ).json()["schedule_id"]
    limit = operator_client.put(f"{API}/limits/queue/emails", {"max_running": 2}, format="json")
    assert limit.status_code == 200, limit.content
    return {
        "{job_id}": job["id"],
        "{schedule_id}": schedule,
        "{scope}/{name}": "queue/emails",
        "{name}": "default",
    }


def read_routes() -> dict[str, dict[str, Any]]:
    """The GET operations of the document, by path. The live routes (`jobs.live`) are plain
    async Django views outside DRF and `ApiView`, and the health probe answers whatever a
    load balancer or monitor adds to its query (a cache-buster): left out here."""
    document = Client().get("/api-docs.json").json()
    return {
        path: operations["get"]
        for path, operations in document["paths"].items()
        if "get" in operations and not {"live", "health"} & set(operations["get"]["tags"])
    }


def fill(path: str, filled_paths: dict[str, str]) -> str:
    for placeholder, value in filled_paths.items():
        path = path.replace(placeholder, value)
    assert "{" not in path, f"no object to fill {path} with"
    return path


def documented_value(schema: dict[str, Any], name: str) -> str:
    if "enum" in schema:
        return str(schema["enum"][0])
    if "anyOf" in schema:
        return documented_value(schema["anyOf"][0], name)
    if schema["type"] == "integer":
        return str(schema.get("minimum", 1))
    return STRING_VALUES.get(name, "noop")


def test_every_read_refuses_an_unknown_parameter_naming_it(viewer_client, filled_paths):
    routes = read_routes()
    assert {f"{API}/jobs/stats", f"{API}/schedules", f"{API}/limits/{{scope}}/{{name}}"} <= set(
        routes
    )
    answers = {}
    for path in routes:
        response = viewer_client.get(f"{fill(path, filled_paths)}?{UNKNOWN}=1")
        if response.status_code != 400:
            answers[path] = (response.status_code, None)
            continue
        error = assert_error(response, 400, "validation_error")
        assert UNKNOWN in error["message"]
        answers[path] = (400, error["details"])
    expected = {path: (400, {UNKNOWN: ["Unknown query parameter."]}) for path in routes}
    assert answers == expected


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/jobs/stats", {"type": "noop"}),
        ("/schedules", {"status": "paused"}),
        ("/queues", {"queue": "default"}),
        ("/jobs/{job_id}/graph", {"depth": "1", "direction": "up"}),
        ("/jobs/{job_id}", {"fields": "id"}),
    ],
)
def test_a_filter_a_route_does_not_have_is_refused_not_ignored(
    viewer_client, filled_paths, path, query
):
    response = viewer_client.get(f"{fill(API + path, filled_paths)}?{urlencode(query)}")
    error = assert_error(response, 400, "validation_error")
    taken = {"depth"}
    assert error["details"] == {
        name: ["Unknown query parameter."] for name in query if name not in taken
    }


def test_every_documented_parameter_is_still_taken(viewer_client, filled_paths):
    refused = {}
    for path, operation in read_routes().items():
        url = fill(path, filled_paths)
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "query":
                continue
            name = parameter["name"]
            query = {name: documented_value(parameter["schema"], name)}
            response = viewer_client.get(f"{url}?{urlencode(query)}")
            if response.status_code != 200:
                refused[(path, name)] = (response.status_code, response.content)
    assert refused == {}


def test_every_read_still_takes_a_format(viewer_client, filled_paths):
    # DRF's `format` picks the renderer: the browsable API's links and a client's
    # `?format=json` use it on any route.
    for path in read_routes():
        url = fill(path, filled_paths)
        response = viewer_client.get(url, {"format": "json"})
        assert response.status_code == 200, (path, response.content)
        assert response["Content-Type"] == "application/json"
        browsable = viewer_client.get(url, {"format": "api"})
        assert browsable.status_code == 200, (path, browsable.content)
        assert browsable["Content-Type"].startswith("text/html")


def test_the_api_root_and_the_docs_still_answer(viewer_client, anon_client):
    assert viewer_client.get(f"{API}/", {"format": "api"}).status_code == 200
    assert (
        anon_client.get(f"{API}/", {"format": "json"})
        .json()["jobs"]
        .startswith(f"http://testserver{API}/jobs")
    )
    error = assert_error(anon_client.get(f"{API}/", {UNKNOWN: "1"}), 400, "validation_error")
    assert error["details"] == {UNKNOWN: ["Unknown query parameter."]}
    assert Client().get("/api-docs").status_code == 200
    assert Client().get("/api-docs.json").status_code == 200


def test_the_job_lists_answer_as_before(viewer_client):
    for path in (f"{API}/jobs", f"{API}/jobs/dlq"):
        response = viewer_client.get(path, {"statuss": "pending", "limit": "2"})
        error = assert_error(response, 400, "validation_error")
        assert error["details"] == {"statuss": ["Unknown query parameter."]}
        empty = assert_error(viewer_client.get(path, {"type": ""}), 400, "validation_error")
        assert empty["details"] == {"type": ["Empty: give a value, or leave the parameter out."]}


def test_a_repeated_unknown_parameter_is_named_as_repeated(viewer_client):
    # One value per parameter is checked first, on every route, as before.
    response = viewer_client.get(f"{API}/jobs/stats?depth=1&depth=2")
    error = assert_error(response, 400, "validation_error")
    assert error["details"] == {"depth": ["Given more than once: send one value."]}


def test_credentials_are_checked_before_the_parameters(anon_client):
    response = anon_client.get(f"{API}/jobs/stats", {UNKNOWN: "1"})
    assert_error(response, 401, "not_authenticated")
