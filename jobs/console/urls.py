from django.urls import path

from jobs.api import converters  # noqa: F401 - registers `limit_name`
from jobs.display import Action

from . import views

app_name = "console"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("dashboard/<slug:part>", views.dashboard_part, name="dashboard-part"),
    path("jobs", views.ledger, name="ledger"),
    path("jobs/new", views.job_new, name="job-new"),
    path("jobs/<uuid:job_id>", views.job_page, {"dlq": False}, name="job-detail"),
    path("jobs/<uuid:job_id>/row", views.job_row, name="job-row"),
    # One route per operator action: job-cancel, job-retry, job-purge.
    *(
        path(
            f"jobs/<uuid:job_id>/{action}",
            views.job_action,
            {"action": action},
            name=f"job-{action}",
        )
        for action in Action
    ),
    path(
        "jobs/<uuid:job_id>/payload.json", views.job_json, {"field": "payload"}, name="job-payload"
    ),
    path("jobs/<uuid:job_id>/result.json", views.job_json, {"field": "result"}, name="job-result"),
    path("dlq", views.dlq_overview, name="dlq"),
    path("dlq/retry", views.dlq_bulk_retry, name="dlq-retry"),
    path("dlq/empty", views.dlq_empty, name="dlq-empty"),
    path("dlq/<uuid:job_id>", views.job_page, {"dlq": True}, name="dlq-detail"),
    path("dlq/<uuid:job_id>/edit", views.dlq_edit, name="dlq-edit"),
    path("bulk/<slug:action>", views.bulk_action, name="bulk"),
    path("audit", views.audit_log, name="audit"),
    path("schedules", views.schedules, name="schedules"),
    *(
        path(
            f"schedules/<uuid:schedule_id>/{action}",
            views.schedule_action,
            {"action": action},
            name=f"schedule-{action}",
        )
        for action in views.SCHEDULE_ACTIONS
    ),
    path("queues", views.queues_page, name="queues"),
    path("queues/<str:name>/pause", views.queue_pause, {"paused": True}, name="queue-pause"),
    path("queues/<str:name>/resume", views.queue_pause, {"paused": False}, name="queue-resume"),
    path("limits", views.limit_set, name="limit-set"),
    path("limits/<str:scope>/<limit_name:name>/remove", views.limit_remove, name="limit-remove"),
    path("settings", views.settings_page, name="settings"),
    path("settings/preferences", views.save_preferences, name="preferences"),
    path("settings/webhooks", views.webhook_create, name="webhook-create"),
    path("settings/webhooks/<int:webhook_id>/delete", views.webhook_delete, name="webhook-delete"),
    path("settings/webhooks/<int:webhook_id>/test", views.webhook_test, name="webhook-test"),
]
