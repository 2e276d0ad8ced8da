from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

from jobs.api import probes
from jobs.api.errors import not_found_view
from jobs.api.views import MetricsView
from jobs.console import lockout


class FaviconView(RedirectView):
    """`/favicon.ico`, which browsers ask for on pages that name no icon (the admin, the
    browsable API): the console's, by its static URL (hashed once collected)."""

    permanent = True

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("console/favicon.svg")


urlpatterns = [
    path("favicon.ico", FaviconView.as_view()),
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("api/", include("jobs.live.urls")),
    path("api/v1/", include("jobs.api.urls")),
    # Unknown routes under /api/ answer with the error envelope, even when DEBUG is on, and
    # to every method: a token client has no CSRF cookie, and a 404 changes nothing.
    re_path(r"^api/", csrf_exempt(not_found_view)),
    path("api-docs.json", SpectacularJSONAPIView.as_view(), name="openapi-schema"),
    path("api-docs", SpectacularSwaggerView.as_view(url_name="openapi-schema"), name="api-docs"),
    path("metrics", MetricsView.as_view(), name="metrics"),
    # Ahead of the admin's own page: its old password counts toward the login lockout.
    path(
        "admin/password_change/",
        admin.site.admin_view(lockout.AdminPasswordChangeView.as_view(), cacheable=True),
    ),
    path("admin/", admin.site.urls),
    # Django's account pages but its password reset ones: linked from nowhere, they sent
    # reset mail to any address asked, unthrottled, and the reset link was written into the
    # access log. An operator resets a password in the admin or with `changepassword`.
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "accounts/password_change/",
        lockout.PasswordChangeView.as_view(),
        name="password_change",
    ),
    path(
        "accounts/password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("", include("jobs.console.urls")),
]

handler400 = "scheduler_project.error_pages.bad_request"
handler404 = "scheduler_project.error_pages.page_not_found"
handler500 = "scheduler_project.error_pages.server_error"
