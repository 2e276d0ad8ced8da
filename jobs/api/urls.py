"""Routes under /api/v1, no trailing slashes. The fixed `jobs/...` paths come before
`jobs/<job_id>` so that `batch`, `stats`, `dlq` and `empty-dlq` are never taken for an id."""

from django.urls import URLPattern, URLResolver, include, path

from . import (
    converters,  # noqa: F401 - registers `limit_name`
    views,
)

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.ApiRootView.as_view(), name="api-root"),
    path("health", views.HealthView.as_view(), name="api-health"),
    path("jobs", views.JobListView.as_view(), name="api-jobs"),
    path("jobs/batch", views.JobBatchView.as_view(), name="api-job-batch"),
    path("jobs/stats", views.JobStatsView.as_view(), name="api-job-stats"),
    path("jobs/dlq", views.DlqListView.as_view(), name="api-job-dlq"),
    path("jobs/empty-dlq", views.EmptyDlqView.as_view(), name="api-job-empty-dlq"),
    path("jobs/<str:job_id>", views.JobDetailView.as_view(), name="api-job-detail"),
    path("jobs/<str:job_id>/attempts", views.JobAttemptsView.as_view(), name="api-job-attempts"),
    path("jobs/<str:job_id>/explain", views.JobExplainView.as_view(), name="api-job-explain"),
    path("jobs/<str:job_id>/graph", views.JobGraphView.as_view(), name="api-job-graph"),
    path("jobs/<str:job_id>/cancel", views.JobCancelView.as_view(), name="api-job-cancel"),
    path("jobs/<str:job_id>/retry", views.JobRetryView.as_view(), name="api-job-retry"),
    path("jobs/<str:job_id>/purge", views.JobPurgeView.as_view(), name="api-job-purge"),
    path("schedules", views.ScheduleListView.as_view(), name="api-schedules"),
    path(
        "schedules/<str:schedule_id>",
        views.ScheduleDetailView.as_view(),
        name="api-schedule-detail",
    ),
    path(
        "schedules/<str:schedule_id>/pause",
        views.SchedulePauseView.as_view(),
        name="api-schedule-pause",
    ),
    path(
        "schedules/<str:schedule_id>/resume",
        views.ScheduleResumeView.as_view(),
        name="api-schedule-resume",
    ),
    path("queues", views.QueueListView.as_view(), name="api-queues"),
    path("queues/<str:name>", views.QueueDetailView.as_view(), name="api-queue-detail"),
    path("queues/<str:name>/pause", views.QueuePauseView.as_view(), name="api-queue-pause"),
    path("queues/<str:name>/resume", views.QueueResumeView.as_view(), name="api-queue-resume"),
    path("limits", views.LimitListView.as_view(), name="api-limits"),
    path("limits/<str:scope>/<limit_name:name>", views.LimitDetailView.as_view(), name="api-limit"),
    # The browsable API's log-in link; console users are signed in already.
    path("auth/", include("rest_framework.urls")),
]
