"""Who may call what, route by route. Every route the URL resolver serves outside the admin
and Django's own account pages is in one table here: a route added without saying who may
write to it fails `test_every_route_is_in_the_table`, before anyone relies on it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient
from rest_framework.views import APIView

from jobs import queues, state, webhooks
from jobs.models import AuditEntry, Job, Limit, Queue, Schedule, UserPreference, Webhook
from tests.conftest import token_client
from tests.console.helpers import dead_letter, login

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch", "delete")

# Each API route: the write methods it has (viewers get 403 for these, and 405 for the
# others, as everyone does), or OPEN for the routes that read no credentials.
OPEN = "open"
API: dict[str, tuple[str, ...] | str] = {
    "api-root": OPEN,
    "api-health": OPEN,
    "api-jobs": ("post",),
    "api-job-batch": ("post",),
    "api-job-stats": (),
    "api-job-dlq": (),
    "api-job-empty-dlq": ("delete",),
    "api-job-detail": (),
    "api-job-attempts": (),
    "api-job-explain": (),
    "api-job-graph": (),
    "api-job-cancel": ("post",),
    "api-job-retry": ("post",),
    "api-job-purge": ("delete",),
    "api-schedules": (),
    "api-schedule-detail": ("delete",),
    "api-schedule-pause": ("post",),
    "api-schedule-resume": ("post",),
    "api-queues": (),
    "api-queue-detail": (),
    "api-queue-pause": ("post",),
    "api-queue-resume": ("post",),
    "api-limits": (),
    "api-limit": ("put", "delete"),
    "metrics": (),
}
# The live routes read only (GET and HEAD): any write is a 405, whoever asks.
LIVE = {"job-stream", "job-stream-v1", "job-stream-status"}

# Each console route: READ (GET only), ACT (POST only, an operator's action), FORM (GET
# shows anyone the form, saying who may use it; its POST is an operator's action), CONFIRM
# (an operator's action whose GET is its confirmation page, for operators only too), OWN
# (POST only, and a viewer may: it changes only their own preferences).
READ, ACT, FORM, CONFIRM, OWN = "read", "act", "form", "confirm", "own"
SHOWN = {ACT: 405, FORM: 200, CONFIRM: 403, OWN: 405}
CONSOLE = {
    "console:dashboard": READ,
    "console:dashboard-part": READ,
    "console:ledger": READ,
    "console:job-new": FORM,
    "console:job-detail": READ,
    "console:job-row": READ,
    "console:job-cancel": ACT,
    "console:job-retry": ACT,
    "console:job-purge": ACT,
    "console:job-payload": READ,
    "console:job-result": READ,
    "console:dlq": READ,
    "console:dlq-retry": CONFIRM,
    "console:dlq-empty": CONFIRM,
    "console:dlq-detail": READ,
    "console:dlq-edit": ACT,
    "console:bulk": CONFIRM,
    "console:audit": READ,
    "console:schedules": READ,
    "console:schedule-pause": ACT,
    "console:schedule-resume": ACT,
    "console:schedule-delete": ACT,
    "console:queues": READ,
    "console:queue-pause": ACT,
    "console:queue-resume": ACT,
    "console:limit-set": ACT,
    "console:limit-remove": ACT,
    "console:settings": READ,
    "console:preferences": OWN,
    "console:webhook-create": ACT,
    "console:webhook-delete": ACT,
    "console:webhook-test": ACT,
}
# Served by Django or a library, each tested where it is configured.
ELSEWHERE = re.compile(
    r"^(admin/|accounts/|api/v1/auth/|api-docs|favicon\.ico$|healthz$|readyz$|\^api/)"
)


def routes() -> Iterator[tuple[str, str, URLPattern]]:
    """(route, name, pattern) of every route, namespaced names as `reverse` takes them."""

    def walk(patterns: list[Any], prefix: str, namespace: str) -> Iterator[Any]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = f"{pattern.namespace}:" if pattern.namespace else namespace
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
            else:
                yield prefix + str(pattern.pattern), f"{namespace}{pattern.name}", pattern

    yield from walk(get_resolver().url_patterns, "", "")


@pytest.fixture
def world(operator: Any) -> dict[str, Any]:
    """One of each thing a write could change, named by the paths' parameters."""
    schedule_run = state.enqueue("noop", {}, cron="*/5 * * * *")
    queues.set_limit("queue", "default", max_running=3)
    hook = webhooks.create_webhook(
        url="https://hooks.example.com/h", event_types=["job.completed"], secret="s", user=operator
    )
    return {
        "pending": state.enqueue("noop", {}, priority=2)["id"],
        "dead": dead_letter()["id"],
        "schedule_id": str(Job.objects.get(id=schedule_run["id"]).schedule_id),
        "webhook_id": str(hook.id),
    }


def path_of(route: str, name: str, world: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        parameter = match.group(2)
        if parameter == "job_id":
            return world["pending"] if name.endswith("cancel") else world["dead"]
        if parameter == "scope":
            return "queue"
        if parameter in ("name", "part", "action"):
            return {"part": "active", "action": "purge"}.get(parameter, "default")
        return world[parameter]

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", value, route)


def snapshot() -> dict[str, Any]:
    """What any write of these routes would change."""
    return {
        "jobs": sorted(Job.objects.values_list("id", "status", "in_dlq", "payload")),
        "schedules": sorted(Schedule.objects.values_list("id", "paused")),
        "queues": sorted(Queue.objects.values_list("name", "paused")),
        "limits": sorted(Limit.objects.values_list("scope", "name", "max_running")),
        "webhooks": sorted(Webhook.objects.values_list("id", "url")),
        "audit": AuditEntry.objects.count(),
        "preferences": UserPreference.objects.count(),
    }


API_BODIES = {
    "api-jobs": {"type": "noop", "payload": {}},
    "api-job-batch": {"jobs": [{"type": "noop", "payload": {}}]},
    "api-limit": {"max_running": 1},
}
CONSOLE_FORMS = {
    "console:job-new": {"type": "noop", "payload": "{}", "priority": "2"},
    "console:dlq-edit": {"payload": '{"edited": true}'},
    "console:limit-set": {"scope": "queue", "name": "default", "max_running": "9"},
    "console:webhook-create": {
        "url": "https://hooks.example.com/other",
        "event_types": ["job.completed"],
        "secret": "s",
    },
}


def test_every_route_is_in_the_table() -> None:
    names = {name for route, name, _ in routes() if not ELSEWHERE.match(route)}
    assert names == set(API) | LIVE | set(CONSOLE)
    for _, name, pattern in routes():
        if name in API:
            view = pattern.callback.view_class  # type: ignore[attr-defined]
            assert issubclass(view, APIView), name
            has = tuple(method for method in WRITES if hasattr(view, method))
            assert API[name] in (OPEN, has), (name, has)


def api_call(client: APIClient, method: str, path: str, name: str) -> Any:
    return getattr(client, method)(path, API_BODIES.get(name, {}), format="json")


def test_api_writes_need_a_token_then_an_operator_and_other_methods_are_405(
    world: dict[str, Any], viewer: Any, operator: Any
) -> None:
    before = snapshot()
    anonymous, as_viewer, as_operator = APIClient(), token_client(viewer), token_client(operator)
    for route, name, _ in routes():
        if name not in API or API[name] == OPEN:
            continue
        path = path_of(route, name, world)
        has = API[name]
        response = anonymous.get(path)
        assert response.status_code == 401, path
        assert response["WWW-Authenticate"] == "Bearer", path
        assert response.json()["error"]["code"] == "not_authenticated", path
        assert as_viewer.get(path).status_code not in (401, 403), path
        for method in WRITES:
            response = api_call(anonymous, method, path, name)
            assert (response.status_code, response["WWW-Authenticate"]) == (401, "Bearer"), path
            code = "permission_denied" if method in has else "method_not_allowed"
            for client, expected in ((as_viewer, code), (as_operator, "method_not_allowed")):
                if client is as_operator and method in has:
                    continue
                response = api_call(client, method, path, name)
                assert response.json()["error"]["code"] == expected, (method, path)
                assert response.status_code == {"permission_denied": 403}.get(expected, 405)
    assert snapshot() == before


def test_live_routes_refuse_every_write_whoever_asks(world: dict[str, Any], viewer: Any) -> None:
    as_viewer = token_client(viewer)
    for route, name, _ in routes():
        if name in LIVE:
            for method in WRITES:
                response = getattr(as_viewer, method)("/" + route)
                assert response.status_code == 405, (method, route)
                assert response.json()["error"]["code"] == "method_not_allowed"


def console_routes(world: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    for route, name, _ in routes():
        if name in CONSOLE:
            yield path_of(route, name, world), name, CONSOLE[name]


def test_a_viewer_acts_on_nothing_in_the_console_but_their_own_preferences(
    world: dict[str, Any], viewer: Any
) -> None:
    browser = login(viewer)
    before = snapshot()
    for path, name, kind in console_routes(world):
        shown = browser.get(path)
        if kind == READ:
            assert shown.status_code not in (403, 405), path
        else:
            assert shown.status_code == SHOWN[kind], path
        # HEAD wherever GET is (RFC 9110): an uptime check's HEAD of a page was a 405.
        assert browser.head(path).status_code == shown.status_code, path
        if kind == OWN:
            continue
        response = browser.post(path, CONSOLE_FORMS.get(name, {}))
        assert response.status_code == (405 if kind == READ else 403), path
        if kind != READ:
            assert "for operators" in response.content.decode(), path
    assert snapshot() == before
    saved = browser.post(
        "/settings/preferences", {"theme": "dark", "time_zone": "UTC", "page_size": "20"}
    )
    assert saved.status_code == 302
    assert UserPreference.objects.get(user=viewer).theme == "dark"


def test_every_console_post_needs_a_login_and_the_csrf_token(
    world: dict[str, Any], operator: Any
) -> None:
    anonymous = Client(enforce_csrf_checks=True)
    without_token = Client(enforce_csrf_checks=True)
    without_token.force_login(operator)
    before = snapshot()
    for path, name, _ in console_routes(world):
        refused = anonymous.post(path, CONSOLE_FORMS.get(name, {}))
        assert refused.status_code == 302, path
        assert refused["Location"].startswith("/accounts/login/"), path
        forged = without_token.post(path, CONSOLE_FORMS.get(name, {}))
        assert forged.status_code == 403, path
        assert "Nothing was done" in forged.content.decode(), path
    for path in ("/accounts/logout/", "/accounts/password_change/"):
        assert without_token.post(path).status_code == 403, path
    assert without_token.get("/").status_code == 200, "still signed in"
    assert snapshot() == before


def test_a_user_without_a_role_reads_like_a_viewer(world: dict[str, Any]) -> None:
    nobody = get_user_model().objects.create_user("nora", password="pw-nora")
    api, browser = token_client(nobody), login(nobody)
    assert api.get("/api/v1/jobs").status_code == 200
    assert api.post("/api/v1/queues/default/pause").status_code == 403
    assert browser.get("/jobs").status_code == 200
    assert browser.post(f"/jobs/{world['pending']}/cancel").status_code == 403
    assert Job.objects.get(id=uuid.UUID(world["pending"])).status == "pending"
