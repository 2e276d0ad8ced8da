"""The audit log: every operator action from the API, the console and the admin is recorded
with who, from where, what, before and after; everyone signed in reads it, nobody edits it,
and it is pruned under its own retention."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from jobs import queues, retention, state
from jobs.models import AuditEntry, Limit, Webhook
from jobs.registry import registry
from tests.conftest import token_client

from .helpers import dead_letter

pytestmark = pytest.mark.django_db


def create_noop(client: APIClient) -> Any:
    return client.post(
        "/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 2}, format="json"
    )


def entries() -> list[AuditEntry]:
    return list(AuditEntry.objects.order_by("id"))


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_api_actions_are_recorded_with_who_where_and_before_after(
    operator_client: APIClient, operator: Any
) -> None:
    created = operator_client.post(
        "/api/v1/jobs", {"type": "noop", "payload": {"n": 1}, "priority": 1}, format="json"
    ).json()
    operator_client.post(f"/api/v1/jobs/{created['id']}/cancel")
    dead = dead_letter()
    operator_client.post(f"/api/v1/jobs/{dead['id']}/retry")
    gone = dead_letter()
    operator_client.delete(f"/api/v1/jobs/{gone['id']}/purge")
    dead_letter(), dead_letter()
    operator_client.delete("/api/v1/jobs/empty-dlq")

    log = entries()
    assert [(e.action, e.source, e.username, e.address) for e in log] == [
        (action, "api", operator.username, "127.0.0.1")
        for action in ("create", "cancel", "retry", "purge", "empty_dlq")
    ]
    create, cancel, retry, purge, emptied = log
    assert create.target == created["id"]
    assert create.after["payload"] == {"n": 1}
    assert (cancel.before, cancel.after) == ({"status": "pending"}, {"status": "cancelled"})
    assert (retry.target, retry.before["status"], retry.after) == (
        dead["id"],
        "dlq",
        {"status": "pending"},
    )
    assert purge.before["id"] == gone["id"]  # the purged job is kept in the entry
    assert (emptied.target, emptied.count) == ("2 jobs", 2)


def test_each_way_of_creating_a_job_records_the_same_entry(
    operator_client: APIClient, operator: Any
) -> None:
    """A plain job (its entry written by the statement that creates it), a dependent one and
    a schedule's first run (written once their edges or schedule exist) read alike."""
    plain = operator_client.post(
        "/api/v1/jobs",
        {
            "type": "noop",
            "payload": {"n": 1},
            "priority": 3,
            "scheduled_at": "2030-01-02T03:04:05Z",
        },
        format="json",
    ).json()
    dependent = operator_client.post(
        "/api/v1/jobs",
        {"type": "noop", "payload": {}, "priority": 2, "depends_on": plain["id"]},
        format="json",
    ).json()
    nightly = operator_client.post(
        "/api/v1/jobs",
        {"type": "noop", "payload": {}, "priority": 1, "cron": "30 2 * * *"},
        format="json",
    ).json()

    log = entries()
    assert [(e.action, e.user_id, e.username, e.source, e.target, e.count) for e in log] == [
        ("create", operator.pk, operator.username, "api", job["id"], 1)
        for job in (plain, dependent, nightly)
    ]
    assert [(e.summary, e.before, e.after) for e in log] == [
        (
            "Created a job of type noop",
            None,
            {
                key: job[key]
                for key in ("type", "payload", "priority", "scheduled_at", "depends_on")
            },
        )
        for job in (plain, dependent, nightly)
    ]
    assert log[0].after["scheduled_at"] == "2030-01-02T03:04:05.000Z"
    assert log[1].after["depends_on"] == plain["id"]


def test_a_created_jobs_summary_reads_well_whatever_its_type_begins_with(
    operator_client: APIClient,
) -> None:
    # "Created a echo job": the article depended on the type's name.
    registry.register("archive_orders")(lambda job: None)
    try:
        for name in ("archive_orders", "noop"):
            response = operator_client.post(
                "/api/v1/jobs", {"type": name, "payload": {}, "priority": 2}, format="json"
            )
            assert response.status_code == 201
    finally:
        registry.unregister("archive_orders")
    assert [e.summary for e in entries()] == [
        "Created a job of type archive_orders",
        "Created a job of type noop",
    ]


def test_a_job_created_by_the_system_is_not_audited() -> None:
    state.enqueue("noop", {})
    assert entries() == []


def test_console_and_admin_actions_say_where_they_came_from(operator: Any) -> None:
    console = logged_in(operator)
    job = state.enqueue("noop", {})
    console.post(f"/jobs/{job['id']}/cancel")
    console.post(
        "/settings/webhooks",
        {"url": "https://hooks.example.com/x", "event_types": ["job.completed"], "secret": "s3"},
    )
    hook = Webhook.objects.get()
    console.post(f"/settings/webhooks/{hook.pk}/delete")

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    dead = dead_letter()
    logged_in(root).post(
        "/admin/jobs/deadletterjob/",
        {"action": "retry_selected", "_selected_action": [dead["id"]]},
    )

    assert [(e.action, e.source, e.username) for e in entries()] == [
        ("cancel", "console", operator.username),
        ("webhook_create", "console", operator.username),
        ("webhook_delete", "console", operator.username),
        ("retry", "admin", "root"),
    ]
    created = entries()[1]
    assert created.after["url"] == "https://hooks.example.com/x"
    assert "s3" not in str(created.after)  # the secret is never written down


# Queue pause and resume, limit create, change and delete, as each surface records them.
QUEUE_AND_LIMIT_LOG = [
    ("queue_pause", "queue emails", {"paused": False}, {"paused": True}),
    ("queue_resume", "queue emails", {"paused": True}, {"paused": False}),
    (
        "limit_create",
        "limit queue emails",
        None,
        {"max_running": 5, "max_starts": None, "period_seconds": None},
    ),
    (
        "limit_change",
        "limit queue emails",
        {"max_running": 5, "max_starts": None, "period_seconds": None},
        {"max_running": 2, "max_starts": 10, "period_seconds": 60},
    ),
    (
        "limit_delete",
        "limit queue emails",
        {"max_running": 2, "max_starts": 10, "period_seconds": 60},
        None,
    ),
]


def queue_and_limit_log(source: str, username: str) -> None:
    log = [e for e in entries() if e.action.startswith(("queue_", "limit_"))]
    assert [(e.action, e.target, e.before, e.after) for e in log] == QUEUE_AND_LIMIT_LOG
    assert {(e.source, e.username, e.address) for e in log} == {(source, username, "127.0.0.1")}


def test_queue_and_limit_changes_from_the_api_are_recorded(
    operator_client: APIClient, operator: Any
) -> None:
    operator_client.post("/api/v1/queues/emails/pause")
    operator_client.post("/api/v1/queues/emails/resume")
    limit = "/api/v1/limits/queue/emails"
    operator_client.put(limit, {"max_running": 5}, format="json")
    operator_client.put(
        limit, {"max_running": 2, "max_starts": 10, "period_seconds": 60}, format="json"
    )
    operator_client.delete(limit)
    operator_client.delete(limit)  # nothing left to remove: nothing recorded
    queue_and_limit_log("api", operator.username)


def test_queue_and_limit_changes_from_the_console_are_recorded(operator: Any) -> None:
    console = logged_in(operator)
    console.post("/queues/emails/pause")
    console.post("/queues/emails/resume")
    console.post("/limits", {"scope": "queue", "name": "emails", "max_running": "5"})
    console.post(
        "/limits",
        {
            "scope": "queue",
            "name": "emails",
            "max_running": "2",
            "max_starts": "10",
            "period_seconds": "60",
        },
    )
    console.post("/limits/queue/emails/remove")
    queue_and_limit_log("console", operator.username)


def test_queue_and_limit_changes_from_the_admin_are_recorded() -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    admin = logged_in(root)
    admin.post("/admin/jobs/queue/add/", {"name": "emails", "paused": "on"})
    admin.post("/admin/jobs/queue/", {"action": "resume_selected", "_selected_action": ["emails"]})
    admin.post("/admin/jobs/limit/add/", {"scope": "queue", "name": "emails", "max_running": "5"})
    limit = Limit.objects.get()
    admin.post(
        f"/admin/jobs/limit/{limit.pk}/change/",
        {"max_running": "2", "max_starts": "10", "period_seconds": "60"},
    )
    admin.post(f"/admin/jobs/limit/{limit.pk}/delete/", {"post": "yes"})
    queue_and_limit_log("admin", "root")
    # Deleting selected limits goes the same way.
    queues.set_limit("type", "noop", max_running=1)
    admin.post(
        "/admin/jobs/limit/",
        {
            "action": "delete_selected",
            "_selected_action": [Limit.objects.get().pk],
            "post": "yes",
        },
    )
    assert not Limit.objects.exists()
    assert entries()[-1].action == "limit_delete"
    assert entries()[-1].target == "limit type noop"


def test_work_nobody_asked_for_is_not_an_operator_action() -> None:
    state.enqueue("noop", {})  # a worker, a command, a webhook delivery: no one is acting
    assert entries() == []


def test_viewers_read_the_log_and_filter_it_but_nobody_can_change_it(
    operator_client: APIClient, viewer: Any
) -> None:
    for _ in range(2):
        operator_client.post(
            "/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 2}, format="json"
        )
    job = operator_client.post(
        "/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 2}, format="json"
    )
    operator_client.post(f"/api/v1/jobs/{job.json()['id']}/cancel")

    page = logged_in(viewer).get("/audit", {"action": "cancel"})
    assert page.status_code == 200
    assert [e.action for e in page.context["entries"]] == ["cancel"]
    assert logged_in(viewer).get("/audit").context["entries"][0].action == "cancel"  # newest first

    entry = AuditEntry.objects.first()
    assert entry is not None
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(action="nothing happened")

    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    admin = logged_in(root)
    assert admin.get("/admin/jobs/auditentry/").status_code == 200
    assert admin.get("/admin/jobs/auditentry/add/").status_code == 403
    assert (
        admin.post(f"/admin/jobs/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_a_user_who_acted_can_be_deleted_and_their_entries_keep_their_name(
    operator: Any,
) -> None:
    # The entry's user is SET_NULL on deletion, which the trigger refusing every change to
    # an entry turned into a 500 in the admin: nobody who acted could be deleted.
    client = token_client(operator)
    client.post("/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 2}, format="json")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")

    deleted = logged_in(root).post(
        f"/admin/auth/user/{operator.pk}/delete/", {"post": "yes"}, follow=True
    )

    assert deleted.status_code == 200
    assert not get_user_model().objects.filter(pk=operator.pk).exists()
    (entry,) = AuditEntry.objects.all()
    assert (entry.user_id, entry.username, entry.action) == (None, operator.username, "create")
    # Only that: any other change to the entry is still refused, the name included.
    for change in ({"username": "someone else"}, {"user_id": root.pk}):
        with pytest.raises(DatabaseError), transaction.atomic():
            AuditEntry.objects.filter(pk=entry.pk).update(**change)


def test_entries_past_their_retention_are_pruned(operator_client: APIClient, settings: Any) -> None:
    settings.SCHEDULER_RETAIN_AUDIT = 3600
    operator_client.post(
        "/api/v1/jobs", {"type": "noop", "payload": {}, "priority": 2}, format="json"
    )
    old = AuditEntry.objects.create(
        at=timezone.now() - timedelta(hours=2),
        username="ghost",
        source="api",
        action="create",
        target=str(uuid.uuid4()),
    )
    retention.prune(limit=100, continues=False)
    assert not AuditEntry.objects.filter(pk=old.pk).exists()
    assert AuditEntry.objects.count() == 1


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (90 * 86_400, "kept for 90\xa0days."),
        (86_400 + 3_600, "kept for 1\xa0day, 1\xa0hour."),
        (14 * 86_400, "kept for 2\xa0weeks."),
        (0, "kept forever."),
    ],
)
def test_the_audit_page_says_its_retention_as_configured(
    viewer: Any, settings: Any, seconds: int, said: str
) -> None:
    # 90 days read "2 months, 4 weeks" (Django's timesince counts calendar months).
    settings.SCHEDULER_RETAIN_AUDIT = seconds
    assert said in logged_in(viewer).get("/audit").content.decode()
