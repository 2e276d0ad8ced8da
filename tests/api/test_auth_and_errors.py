"""Authentication and roles, the error envelope of the routes' edges (401, 403, 404, 405,
429, 500), request ids and the access log, health, the docs and the browsable root."""

from __future__ import annotations

import io
import json
import logging
import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.core.exceptions import RequestDataTooBig
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from jobs.api.auth import issue_token
from jobs.api.errors import exception_handler
from jobs.logging import JsonFormatter
from jobs.models import ApiToken, Job
from jobs.roles import is_operator

from .test_job_routes import JOB_FIELDS, assert_error

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs"
NEW_JOB = {"type": "noop", "payload": {}, "priority": 2}

READS = [
    ("get", JOBS),
    ("get", f"{JOBS}/stats"),
    ("get", f"{JOBS}/dlq"),
]


def writes(job_id):
    return [
        ("post", JOBS),
        ("post", f"{JOBS}/{job_id}/cancel"),
        ("post", f"{JOBS}/{job_id}/retry"),
        ("delete", f"{JOBS}/{job_id}/purge"),
        ("delete", f"{JOBS}/empty-dlq"),
    ]


def call(client, method, path):
    if method == "post":
        return client.post(path, NEW_JOB, format="json")
    return getattr(client, method)(path)


# --- authentication and roles ----------------------------------------------------------------


def test_every_route_needs_credentials(anon_client, job_in_state):
    job = job_in_state("dlq")
    routes = [*READS, ("get", f"{JOBS}/{job['id']}"), ("get", f"{JOBS}/{job['id']}/attempts")]
    for method, path in routes + writes(job["id"]):
        response = call(anon_client, method, path)
        assert_error(response, 401, "not_authenticated")
        assert response["WWW-Authenticate"] == "Bearer"
    assert Job.objects.get(id=job["id"]).in_dlq


@pytest.mark.parametrize(
    "header", ["Bearer jsk_not-a-real-token", "Bearer ", "Token abc", "Basic dXNlcjpwdw=="]
)
def test_bad_credentials_are_401(header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(JOBS)
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Bearer"


def test_token_of_an_inactive_user_is_refused(viewer, viewer_client):
    viewer.is_active = False
    viewer.save()
    assert_error(viewer_client.get(JOBS), 401, "not_authenticated")


def test_viewer_may_read(viewer_client, job_in_state):
    job = job_in_state("failed")
    for method, path in [*READS, ("get", f"{JOBS}/{job['id']}/attempts")]:
        assert call(viewer_client, method, path).status_code == 200, path


def test_viewer_may_not_write(viewer_client, job_in_state):
    job = job_in_state("dlq")
    for method, path in writes(job["id"]):
        error = assert_error(call(viewer_client, method, path), 403, "permission_denied")
        assert "Operators" in error["message"]
    assert list(Job.objects.values_list("id", "in_dlq")) == [(uuid.UUID(job["id"]), True)]


def test_operator_may_write(operator_client, job_in_state):
    assert call(operator_client, "post", JOBS).status_code == 201
    job = job_in_state("dlq")
    assert operator_client.post(f"{JOBS}/{job['id']}/retry").status_code == 200
    assert operator_client.post(f"{JOBS}/{job['id']}/cancel").status_code == 200


def test_a_token_records_when_it_was_last_used(viewer, viewer_client):
    assert ApiToken.objects.get(user=viewer).last_used_at is None
    viewer_client.get(JOBS)
    assert ApiToken.objects.get(user=viewer).last_used_at is not None


def test_a_write_reads_token_and_role_once_and_records_use_to_the_minute(operator_client):
    assert call(operator_client, "post", JOBS).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert call(operator_client, "post", JOBS).status_code == 201
    token_queries = [q["sql"] for q in queries if "api_tokens" in q["sql"]]
    assert len(token_queries) == 1, token_queries
    assert token_queries[0].lstrip().startswith("SELECT")
    assert "auth_group" in token_queries[0]
    role_queries = [
        q for q in queries if "auth_group" in q["sql"] and q["sql"] not in token_queries
    ]
    assert not role_queries


def test_session_users_read_and_their_writes_need_the_csrf_token(operator):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get(JOBS).status_code == 200
    error = assert_error(client.post(JOBS, NEW_JOB, format="json"), 403, "permission_denied")
    assert "CSRF" in error["message"]
    assert Job.objects.count() == 0
    # The browsable API hands out the token, as a form on the page and as a cookie.
    assert client.get("/api/v1/", HTTP_ACCEPT="text/html").status_code == 200
    token = client.cookies["csrftoken"].value
    response = client.post(JOBS, NEW_JOB, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


def test_the_browsable_api_runs_under_the_csp_and_logs_out(viewer):
    client = Client()
    client.force_login(viewer)
    page = client.get(JOBS, HTTP_ACCEPT="text/html").content.decode()
    # The site's policy refuses inline style and script: DRF's own page had an inline
    # <style>, and a "Log out" link whose onclick was refused, so it did nothing.
    assert "<style" not in page
    assert not re.search(r"\son[a-z]+=", page)
    logout = re.search(r'<form[^>]*action="([^"]*logout[^"]*)"[^>]*>(.*?)</form>', page, re.S)
    assert logout is not None and 'type="submit"' in logout.group(2)

    client.post(logout.group(1))
    assert client.get(JOBS, HTTP_ACCEPT="application/json").status_code in (401, 403)


def test_session_viewer_may_not_write(viewer):
    client = APIClient()
    client.force_login(viewer)
    assert_error(client.post(JOBS, NEW_JOB, format="json"), 403, "permission_denied")


# --- create_api_token ------------------------------------------------------------------------


def run_create_api_token(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_create_api_token_makes_the_user_and_a_working_token():
    token, note = run_create_api_token("ada", "--role", "operator")
    assert re.fullmatch(r"jsk_[A-Za-z0-9_-]{40,}", token)
    assert "Created user ada" in note
    user = get_user_model().objects.get(username="ada")
    assert is_operator(user)
    assert not user.has_usable_password()
    assert token not in {t.key_hash for t in ApiToken.objects.all()}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.post(JOBS, NEW_JOB, format="json").status_code == 201


def test_create_api_token_defaults_new_users_to_viewer_and_keeps_existing_roles():
    viewer_token, _ = run_create_api_token("bob")
    assert not is_operator(get_user_model().objects.get(username="bob"))
    run_create_api_token("carol", "--role", "operator")
    _, note = run_create_api_token("carol")
    assert "Found user carol" in note
    assert is_operator(get_user_model().objects.get(username="carol"))
    assert ApiToken.objects.filter(user__username="carol").count() == 2
    run_create_api_token("carol", "--role", "viewer")
    assert not is_operator(get_user_model().objects.get(username="carol"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {viewer_token}")
    assert_error(client.post(JOBS, NEW_JOB, format="json"), 403, "permission_denied")


def test_create_api_token_will_not_call_a_staff_user_a_viewer():
    # Staff users are operators (console.md): it printed "with role viewer" and the token
    # could write.
    get_user_model().objects.create(username="stella", is_staff=True)
    with pytest.raises(CommandError, match="'stella' is staff, and staff users are operators"):
        run_create_api_token("stella", "--role", "viewer")
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("role", [[], ["--role", "operator"], ["--role", "viewer"]])
def test_create_api_token_refuses_an_inactive_user(role):
    # It printed a token that every request refused (401), each use counting towards the
    # address's failed-token limit.
    ivan = get_user_model().objects.create(username="ivan", is_active=False)
    with pytest.raises(CommandError, match="'ivan' is inactive"):
        run_create_api_token("ivan", *role)
    assert not ApiToken.objects.exists()
    assert not ivan.groups.exists()


@pytest.mark.parametrize(
    ("username", "message"),
    [
        ("", "This field cannot be blank."),
        ("a b", "Enter a valid username."),
        ("x" * 151, "Ensure this value has at most 150 characters (it has 151)."),
    ],
)
def test_create_api_token_refuses_a_username_django_would_refuse(username, message):
    with pytest.raises(CommandError, match=re.escape(f"{username!r}: {message}")):
        run_create_api_token(username)
    assert not get_user_model().objects.exists()
    assert not ApiToken.objects.exists()


# --- the envelope at the edges ---------------------------------------------------------------


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(
    "path",
    ["/api/v1/nope", "/api/nope", f"{JOBS}/{uuid.UUID(int=7)}/nope", "/api/v1/jobs/stats/x"],
)
def test_unknown_routes_under_api_are_404_envelopes(viewer_client, settings, debug, path):
    settings.DEBUG = debug
    assert_error(viewer_client.get(path), 404, "not_found")


def test_a_request_django_refuses_before_any_view_is_an_envelope_under_api(viewer_client):
    # A Host not in ALLOWED_HOSTS: Django's plain "Bad Request (400)" page before.
    response = viewer_client.get(JOBS, HTTP_HOST="elsewhere.example")
    assert assert_error(response, 400, "validation_error")["message"] == (
        "The request could not be read."
    )


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_a_write_to_an_unknown_route_under_api_is_a_404_envelope_too(operator, method):
    # As a real client sends it: CSRF checks on (the test client turns them off), a token
    # and no cookie. The catch-all answered Django's CSRF failure page, a 403 in HTML.
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(operator)}")
    for path in ["/api/v1/nope", "/api/v1/queues/a/b/pause"]:
        assert_error(getattr(client, method)(path, {}, format="json"), 404, "not_found")


@pytest.mark.parametrize(
    "path", ["/api/jobs/stream", "/api/v1/jobs/stream", "/api/jobs/stream/status"]
)
def test_the_live_routes_answer_in_the_one_error_shape(path):
    # api.md: one shape from every route. The live routes wrote theirs without `details`, and
    # the status route answered a write with the CSRF middleware's HTML page.
    client = Client(enforce_csrf_checks=True)
    for response, status, code in [
        (client.get(path), 401, "not_authenticated"),
        (client.post(path), 405, "method_not_allowed"),
    ]:
        error = assert_error(response, status, code)
        assert set(error) == {"code", "message", "details"}
    assert client.post(path)["Allow"] == "GET, HEAD"


def test_wrong_method_is_405(operator_client):
    response = operator_client.put(JOBS, NEW_JOB, format="json")
    assert_error(response, 405, "method_not_allowed")
    assert set(response["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


@pytest.mark.parametrize("path", ["/api/jobs/stream", "/api/v1/jobs/stream"])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_writing_to_the_event_stream_is_a_405_envelope_not_a_csrf_page(operator, path, method):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    response = getattr(browser, method)(path)
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_error_is_500_without_a_trace_and_logged_with_the_request_id(
    viewer_client, settings, monkeypatch, caplog, debug
):
    settings.DEBUG = debug

    def broken() -> dict[str, int]:
        raise RuntimeError("SELECT secret FROM internals")

    monkeypatch.setattr("jobs.api.views.current_stats", broken)
    with caplog.at_level(logging.ERROR, logger="jobs.api"):
        response = viewer_client.get(f"{JOBS}/stats", HTTP_X_REQUEST_ID="req-500-check")
    error = assert_error(response, 500, "internal_error")
    assert "secret" not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    assert error["details"] == {}
    assert response["X-Request-ID"] == "req-500-check"
    (record,) = [r for r in caplog.records if r.name == "jobs.api"]
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "req-500-check"
    assert "SELECT secret FROM internals" in line["exc_info"]


def test_rate_limit_is_429_with_retry_after(viewer_client, settings):
    settings.API_RATE_LIMIT = "2/min"
    assert viewer_client.get(JOBS).status_code == 200
    assert viewer_client.get(f"{JOBS}/stats").status_code == 200
    response = viewer_client.get(JOBS)
    assert_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    # Health checks are never throttled.
    assert APIClient().get("/api/v1/health").status_code == 200


def test_rate_limit_is_off_by_default(viewer_client, settings):
    assert settings.API_RATE_LIMIT == ""
    for _ in range(30):
        assert viewer_client.get(f"{JOBS}/stats").status_code == 200


# --- request ids and the access log ----------------------------------------------------------


def test_request_id_is_echoed_on_success_and_error(viewer_client):
    ok = viewer_client.get(JOBS, HTTP_X_REQUEST_ID="client-id-123")
    assert ok["X-Request-ID"] == "client-id-123"
    missing = viewer_client.get(f"{JOBS}/{uuid.uuid4()}", HTTP_X_REQUEST_ID="client-id-456")
    assert (missing.status_code, missing["X-Request-ID"]) == (404, "client-id-456")
    anon = APIClient().get(JOBS, HTTP_X_REQUEST_ID="client-id-789")
    assert (anon.status_code, anon["X-Request-ID"]) == (401, "client-id-789")


def test_request_id_is_generated_when_absent_or_unusable(viewer_client):
    first = viewer_client.get(JOBS)["X-Request-ID"]
    second = viewer_client.get(JOBS)["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", first) and first != second
    odd = viewer_client.get(JOBS, HTTP_X_REQUEST_ID="has spaces\tand tabs")["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", odd)


def test_one_json_access_log_line_per_request(viewer_client, caplog):
    with caplog.at_level(logging.INFO, logger="jobs.access"):
        viewer_client.get(f"{JOBS}/stats", HTTP_X_REQUEST_ID="log-line-check")
    (record,) = [r for r in caplog.records if r.name == "jobs.access"]
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "log-line-check"
    assert (line["method"], line["path"], line["status"]) == ("GET", f"{JOBS}/stats", 200)
    assert isinstance(line["duration_ms"], float)


# --- health, docs, root ----------------------------------------------------------------------


def test_health_is_open_and_reports_both_services():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer not-checked-here")
    response = client.get("/api/v1/health")
    assert (response.status_code, response.json()) == (200, {"database": "ok", "redis": "ok"})


@pytest.mark.usefixtures("redis_down")
def test_health_is_503_naming_redis_when_it_is_unreachable():
    response = APIClient().get("/api/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "ok"
    assert body["redis"].startswith("unreachable")
    assert body["error"]["code"] == "unavailable"
    assert response["Retry-After"] == "5"
    assert list(body["error"]["details"]) == ["redis"]


def test_openapi_document_is_open_valid_and_covers_every_route():
    response = APIClient().get("/api-docs.json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)
    operations = {
        (path, method)
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "post", "delete", "put", "patch"}
    }
    assert operations >= {
        ("/api/v1/jobs", "get"),
        ("/api/v1/jobs", "post"),
        ("/api/v1/jobs/stats", "get"),
        ("/api/v1/jobs/dlq", "get"),
        ("/api/v1/jobs/{job_id}", "get"),
        ("/api/v1/jobs/{job_id}/attempts", "get"),
        ("/api/v1/jobs/{job_id}/cancel", "post"),
        ("/api/v1/jobs/{job_id}/retry", "post"),
        ("/api/v1/jobs/{job_id}/purge", "delete"),
        ("/api/v1/jobs/empty-dlq", "delete"),
        ("/api/v1/health", "get"),
    }
    components = schema["components"]["schemas"]
    assert set(components["Job"]["properties"]) == JOB_FIELDS
    assert "bearerAuth" in schema["components"]["securitySchemes"]
    error_ref = "#/components/schemas/Error"
    retry = schema["paths"]["/api/v1/jobs/{job_id}/retry"]["post"]["responses"]
    for status in ("400", "401", "403", "404", "409", "429", "500"):
        assert retry[status]["content"]["application/json"]["schema"]["$ref"] == error_ref
    list_params = {p["name"] for p in schema["paths"]["/api/v1/jobs"]["get"]["parameters"]}
    assert {"status", "priority", "ordering", "page", "limit", "next_retry_before"} <= list_params


def test_swagger_ui_page_is_open_and_served_without_a_cdn():
    response = APIClient().get("/api-docs")
    assert response.status_code == 200
    page = response.content.decode()
    (bundle,) = re.findall(r'src="([^"]*swagger-ui-bundle\.js)"', page)
    assert bundle.startswith("/static/")
    assert finders.find(bundle.removeprefix("/static/")) is not None
    assert '<div id="swagger-ui">' in page
    (schema_url,) = re.findall(r'url: ("[^"]*")', page)
    assert json.loads(schema_url) == "/api-docs.json"


def test_the_favicon_browsers_ask_for_is_the_consoles():
    # The admin, the browsable API and plain JSON answers name no icon, so browsers ask for
    # /favicon.ico: a 404 (and a log line) on every page view before.
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].startswith("/static/console/favicon")
    assert finders.find(response["Location"].removeprefix("/static/")) is not None


def test_browsable_root_lists_the_routes_without_credentials():
    body = APIClient().get("/api/v1/").json()
    assert body["jobs"] == "http://testserver/api/v1/jobs"
    assert body["health"] == "http://testserver/api/v1/health"
    assert body["docs"] == "http://testserver/api-docs"
    page = APIClient().get("/api/v1/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert "http://testserver/api/v1/jobs/stats" in page.content.decode()


@pytest.mark.parametrize("path", ["/api/v1/", "/api-docs", "/api-docs.json"])
@pytest.mark.parametrize("header", ["Bearer jsk_not-a-real-token", "Token abc", "Bearer "])
def test_open_routes_ignore_a_bad_authorization_header(path, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(path)
    assert response.status_code == 200
    if path == "/api-docs":
        assert '<div id="swagger-ui">' in response.content.decode()
    else:
        assert response.json() == APIClient().get(path).json()


def test_browsable_api_renders_lists_details_and_errors_for_a_signed_in_user(
    operator, job_in_state
):
    job = job_in_state("failed")
    client = APIClient()
    client.force_login(operator)
    for path, status in [
        (JOBS, 200),
        (f"{JOBS}/{job['id']}", 200),
        (f"{JOBS}/{job['id']}/attempts", 200),
        (f"{JOBS}/{uuid.uuid4()}", 404),
        (f"{JOBS}?limit=500", 400),
    ]:
        response = client.get(path, HTTP_ACCEPT="text/html")
        assert response.status_code == status, path
        assert response["Content-Type"].startswith("text/html")
    page = client.get(f"{JOBS}/{job['id']}", HTTP_ACCEPT="text/html").content.decode()
    assert job["id"] in page


def test_request_data_too_big_from_django_maps_to_413():
    response = exception_handler(RequestDataTooBig("too big"), {})
    assert response.status_code == 413
    assert response.data["error"]["code"] == "payload_too_large"


def test_a_viewers_refusal_names_what_operators_may_do_beyond_jobs(viewer_client):
    # Refused a queue's pause, a viewer read that operators "may create, cancel, retry and
    # purge jobs", which says nothing of queues.
    refused = viewer_client.post("/api/v1/queues/default/pause")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "permission_denied"
    assert error["message"] == (
        "Your role may only read. Operators may also act on jobs, queues, limits and schedules."
    )
