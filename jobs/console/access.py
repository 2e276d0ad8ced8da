"""Who may see and do what in the console, and the per-user display preferences.

Every console view goes through `console_view`: it sends anonymous users to the login
page, refuses actions to viewers with a 403 (the buttons are hidden too, but the server
is what enforces it), and renders in the user's time zone.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.csrf import csrf_failure as django_csrf_failure
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh
from django_htmx.middleware import HtmxDetails

from jobs.models import UserPreference
from jobs.roles import is_operator
from jobs.stats import current_stats


class ConsoleRequest(HttpRequest):
    """What `console_view` guarantees on the request it passes on."""

    htmx: HtmxDetails
    user: User
    preferences: UserPreference
    can_act: bool


ConsoleView = Callable[..., HttpResponse]


def preferences_of(user: User) -> UserPreference:
    """The user's saved preferences, or the defaults (not saved until changed)."""
    return UserPreference.objects.filter(user=user).first() or UserPreference(user=user)


def user_time_zone(preferences: UserPreference) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(preferences.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo(settings.TIME_ZONE)


def console_view(
    *, methods: Sequence[str] = ("GET",), operator: bool = False
) -> Callable[[ConsoleView], ConsoleView]:
    # HEAD wherever GET is, as RFC 9110 has it (and Django's class-based views do): an
    # uptime check's HEAD of a page was a 405. The server leaves out the body.
    allowed = (*methods, "HEAD") if "GET" in methods else tuple(methods)

    def decorate(view: ConsoleView) -> ConsoleView:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return to_login(request)
            if request.method not in allowed:
                return HttpResponseNotAllowed(allowed)
            console_request = as_console_request(request)
            with timezone.override(user_time_zone(console_request.preferences)):
                if operator and not console_request.can_act:
                    return refuse(console_request)
                return view(console_request, *args, **kwargs)

        return wrapper

    return decorate


def as_console_request(request: HttpRequest) -> ConsoleRequest:
    """A signed-in user's request with what console views and templates read of it."""
    console_request = cast(ConsoleRequest, request)
    console_request.preferences = preferences_of(console_request.user)
    console_request.can_act = is_operator(console_request.user)
    return console_request


def to_login(request: HttpRequest) -> HttpResponse:
    """The login page, then back. An htmx request (a row's button, a live panel) is answered
    with HX-Redirect to it, back to the page the user is on: followed as a redirect, the
    login page would replace the row, and after it the POST-only route would be a 405."""
    htmx = cast(HtmxDetails, getattr(request, "htmx", None))
    if htmx and htmx.current_url_abs_path:
        login = redirect_to_login(htmx.current_url_abs_path)
        return HttpResponseClientRedirect(login["Location"])
    return redirect_to_login(request.get_full_path())


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW. The console's forms fail it when their page outlived its token (a
    login in another tab renews it): an htmx button reloads the page with a note (its
    answer would replace the row), a form gets a console page saying what to do. Elsewhere
    (the admin, the login page), Django's own page; the Log out button has its own answer
    (`_logout_expired`). A console request whose session is gone too (every cookie
    cleared) goes where the view would have sent it: the login page."""
    htmx = getattr(request, "htmx", None)
    if request.path == reverse("logout"):
        return _logout_expired(request)
    if request.path.startswith(("/admin/", "/accounts/")):
        return django_csrf_failure(request, reason)
    if not request.user.is_authenticated:
        return to_login(request)
    if htmx:
        messages.warning(request, f"{EXPIRED} It is reloaded now: do it again.")
        return HttpResponseClientRefresh()
    return page(as_console_request(request), "console/403.html", {"expired": EXPIRED}, status=403)


def _logout_expired(request: HttpRequest) -> HttpResponse:
    """The console's Log out button on a page older than the last login (in another tab).
    Behind Django's CSRF page the user stayed signed in, and someone leaving a shared
    machine believed they had logged out: they are told, with a button that works. The
    check stays (a forged post must not sign anyone out); someone signed out already is
    where they asked to be."""
    if not request.user.is_authenticated:
        return redirect(settings.LOGOUT_REDIRECT_URL)
    context = {"expired": LOGOUT_EXPIRED, "log_out": True}
    return page(as_console_request(request), "console/403.html", context, status=403)


def not_found(request: HttpRequest) -> HttpResponse:
    """A signed-in user's answer for an address nothing serves (handler404)."""
    context = {"what": "page", "message": "Nothing is at this address: the link is wrong."}
    return page(as_console_request(request), "console/404.html", context, status=404)


def too_large(request: HttpRequest) -> HttpResponse:
    """A signed-in user's answer for a form over the body limit (handler400)."""
    context = {"limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
    return page(as_console_request(request), "console/413.html", context, status=413)


EXPIRED = "The page had expired (you signed in again, perhaps in another tab), so nothing was done."
LOGOUT_EXPIRED = (
    "The page had expired (you signed in again, perhaps in another tab), so you were not "
    "logged out."
)


def refuse(request: ConsoleRequest) -> HttpResponse:
    template = "console/partials/refused.html" if request.htmx else "console/403.html"
    return page(request, template, {}, status=403)


def page(
    request: ConsoleRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """Render with what every console template relies on (user preferences, role, DLQ size)."""
    base = {
        "preferences": request.preferences,
        "can_act": request.can_act,
        "time_zone": timezone.get_current_timezone_name(),
        "dlq_count": current_stats()["dlq"] if not request.htmx else None,
    }
    return render(request, template, {**base, **context}, status=status)
