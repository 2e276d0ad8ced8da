"""Retention of the sign-in records: Django's sessions and django-axes' login log. Nothing
else clears them (Django leaves expired sessions to `clearsessions`, which nothing ran, and
django-axes writes a row per login for ever), so both tables grew without bound. The pruner
deletes expired sessions, and login records older than `SCHEDULER_RETAIN_AUDIT`; never a
live session, nor the attempts that hold a lockout."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessLog
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from jobs.retention import Retention, prune
from jobs.roles import Role
from tests.conftest import make_user
from worker.maintenance import Pruner

pytestmark = pytest.mark.django_db(transaction=True)

KEPT = Retention(completed=None, dlq=None)
LOGIN = "/accounts/login/"
NINETY_DAYS = 90 * 24 * 3600.0


def log_in(browser: Client, username: str, password: str) -> int:
    return browser.post(LOGIN, {"username": username, "password": password}).status_code


def signed_in(username: str, address: str) -> Client:
    """A browser signed in to the console through its login form."""
    make_user(username, Role.VIEWER)
    browser = Client(REMOTE_ADDR=address)
    assert log_in(browser, username, "pw-" + username) == 302
    return browser


def sees_the_console(browser: Client) -> bool:
    page = browser.get("/")
    return page.status_code == 200


def prune_once() -> None:
    assert prune(limit=100, continues=False, retention=KEPT) is not None


def test_expired_sessions_go_and_a_signed_in_user_stays_signed_in() -> None:
    expired = signed_in("ada", "203.0.113.1")
    live = signed_in("bob", "203.0.113.2")
    Session.objects.filter(session_key=expired.session.session_key).update(
        expire_date=timezone.now() - timedelta(days=1)
    )

    prune_once()

    assert list(Session.objects.values_list("session_key", flat=True)) == [live.session.session_key]
    assert sees_the_console(live)
    assert not sees_the_console(expired)


def test_login_records_go_past_the_audit_retention_and_recent_ones_stay(
    superuser_client: Client, settings: Any
) -> None:
    signed_in("old-login", "203.0.113.3")
    signed_in("recent-login", "203.0.113.4")
    now = timezone.now()
    AccessLog.objects.filter(username="old-login").update(attempt_time=now - timedelta(days=91))
    AccessLog.objects.filter(username="recent-login").update(attempt_time=now - timedelta(days=89))

    settings.SCHEDULER_RETAIN_AUDIT = 0  # kept forever
    prune_once()
    assert AccessLog.objects.filter(username="old-login").exists()

    settings.SCHEDULER_RETAIN_AUDIT = NINETY_DAYS
    prune_once()
    page = superuser_client.get("/admin/axes/accesslog/")
    assert page.status_code == 200
    listed = page.content.decode()
    assert "recent-login" in listed and "old-login" not in listed


def test_an_active_lockout_still_locks_after_the_pruner_passed(settings: Any) -> None:
    """The attempts are the lockout's state, and django-axes clears them itself: at every
    login, failed or not, it deletes all those older than the cool-off, so they hold one
    cool-off's worth at most. The pruner leaves them alone, even past the audit retention."""
    settings.AXES_COOLOFF_TIME = timedelta(days=120)
    settings.SCHEDULER_RETAIN_AUDIT = NINETY_DAYS
    make_user("ada", Role.VIEWER)
    attacker = Client(REMOTE_ADDR="203.0.113.10")
    for n in range(settings.AXES_FAILURE_LIMIT):
        log_in(attacker, "ada", f"guess-{n}")
    # Locked out 100 days ago, for 120.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(days=100))
    stale = AccessAttempt.objects.create(
        username="cy",
        ip_address="203.0.113.11",
        user_agent="",
        failures_since_start=1,
    )
    AccessAttempt.objects.filter(id=stale.id).update(
        attempt_time=timezone.now() - timedelta(days=121)
    )

    prune_once()

    assert log_in(attacker, "ada", "pw-ada") == 429
    assert not AccessAttempt.objects.filter(id=stale.id).exists()


@pytest.mark.parametrize(("sessions", "logins"), [(5, 3), (3, 5)])
def test_a_backlog_goes_in_bounded_batches_and_the_unit_comes_back_at_once(
    settings: Any, sessions: int, logins: int
) -> None:
    settings.SCHEDULER_RETAIN_COMPLETED = 0
    settings.SCHEDULER_RETAIN_AUDIT = NINETY_DAYS
    long_ago = timezone.now() - timedelta(days=91)
    Session.objects.bulk_create(
        Session(session_key=f"expired-{n}", session_data="", expire_date=long_ago)
        for n in range(sessions)
    )
    AccessLog.objects.bulk_create(
        AccessLog(username=f"user-{n}", user_agent="", http_accept="", path_info=LOGIN)
        for n in range(logins)
    )
    AccessLog.objects.update(attempt_time=long_ago)
    unit = Pruner(interval=60.0, batch=2)

    left = []
    for _ in range(3):
        unit.run_once()
        left.append((Session.objects.count(), AccessLog.objects.count(), unit.interval))

    # A full batch of either brings the pruner back at once.
    assert left == [
        (sessions - 2, logins - 2, 0.0),
        (max(sessions - 4, 0), max(logins - 4, 0), 0.0),
        (0, 0, 60.0),
    ]
