from django.urls import URLPattern, path

from . import views

# Mounted at `api/` before the API's `api/v1/` include, so `v1/jobs/stream` is matched here
# and never reaches the API's `jobs/{id}` route.
urlpatterns: list[URLPattern] = [
    path("jobs/stream", views.job_stream, name="job-stream"),
    path("v1/jobs/stream", views.job_stream, name="job-stream-v1"),
    path("jobs/stream/status", views.stream_status, name="job-stream-status"),
]
