"""A query parameter given more than once is a 400 naming it, on every route: each takes one
value (api.md defines no repeated keys), and Django's QueryDict hands a view the last one, so
`status=pending&status=failed` listed only the failed jobs, as if the client meant that."""

from __future__ import annotations

import pytest

from .test_job_routes import assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
LISTS = [JOBS, f"{JOBS}/dlq", "/api/v1/schedules", "/api/v1/queues"]


def assert_given_more_than_once(response, *names):
    error = assert_error(response, 400, "validation_error")
    assert sorted(error["details"]) == sorted(names)
    for name in names:
        assert error["details"][name] == ["Given more than once: send one value."]
        assert name in error["message"]


def test_two_statuses_are_refused_not_read_as_the_last(viewer_client, job_row):
    job_row(status="pending")
    job_row(status="failed", in_dlq=False)
    response = viewer_client.get(f"{JOBS}?status=pending&status=failed")
    assert_given_more_than_once(response, "status")


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize(
    "query",
    [
        "status=pending&status=failed",
        "priority=1&priority=3",
        "limit=5&limit=500",
        "page=1&page=2",
        "ordering=priority&ordering=-created_at",
        "cursor=first&cursor=first",
        "type=noop&type=noop",
    ],
)
def test_every_list_refuses_a_repeated_parameter(viewer_client, path, query):
    name = query.partition("=")[0]
    assert_given_more_than_once(viewer_client.get(f"{path}?{query}"), name)


def test_every_repeated_parameter_is_named_at_once(viewer_client):
    response = viewer_client.get(f"{JOBS}?limit=5&status=pending&limit=6&status=dlq&priority=1")
    assert_given_more_than_once(response, "limit", "status")


@pytest.mark.parametrize(
    "path",
    [
        f"{JOBS}/stats",
        "/api/v1/limits",
        f"{JOBS}/00000000-0000-0000-0000-000000000000/graph",
        f"{JOBS}/00000000-0000-0000-0000-000000000000/attempts",
    ],
)
def test_other_reads_refuse_a_repeated_parameter_too(viewer_client, path):
    assert_given_more_than_once(viewer_client.get(f"{path}?depth=1&depth=2"), "depth")


def test_a_single_value_of_each_still_lists(viewer_client, job_row):
    pending = job_row(status="pending", priority=1)
    job_row(status="failed", in_dlq=False, priority=1)
    response = viewer_client.get(
        f"{JOBS}?status=pending&priority=1&limit=5&page=1&ordering=priority"
    )
    assert response.status_code == 200, response.content
    assert [job["id"] for job in response.json()["results"]] == [str(pending.id)]


def test_credentials_are_checked_before_the_parameters(anon_client):
    response = anon_client.get(f"{JOBS}?status=pending&status=failed")
    assert_error(response, 401, "not_authenticated")


def test_a_route_without_the_method_stays_405(viewer_client):
    response = viewer_client.get(f"{JOBS}/batch?limit=1&limit=2")
    assert_error(response, 405, "method_not_allowed")


def test_the_openapi_document_says_a_parameter_is_given_once(anon_client):
    document = anon_client.get("/api-docs.json").json()
    for path in ("/api/v1/jobs", "/api/v1/jobs/dlq", "/api/v1/schedules"):
        bad_request = document["paths"][path]["get"]["responses"]["400"]
        assert "more than once" in bad_request["description"]
