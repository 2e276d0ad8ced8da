"""Login lockout (django-axes): repeated failures lock one user name from one address."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def log_in(client: Client, username: str, password: str):
    return client.post(LOGIN, {"username": username, "password": password})


def test_repeated_failures_lock_that_user_from_that_address_and_the_admin_shows_it(settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    get_user_model().objects.create_user("ada", password="right-password")
    get_user_model().objects.create_user("bob", password="bob-password")
    attacker = Client(REMOTE_ADDR="203.0.113.10")

    for n in range(4):
        failed = log_in(attacker, "ada", f"guess-{n}")
        assert failed.status_code == 200
        assert "did not match" in failed.content.decode()
    # The fifth failure locks the pair out; from then on even the right password is refused.
    for password in ["guess-4", "right-password"]:
        locked = log_in(attacker, "ada", password)
        assert locked.status_code == 429
        assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in attacker.session

    # The lockout is for that user from that address: others are unaffected.
    assert log_in(attacker, "bob", "bob-password").status_code == 302
    assert log_in(Client(REMOTE_ADDR="198.51.100.20"), "ada", "right-password").status_code == 302

    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    attempts = admin.get("/admin/axes/accessattempt/")
    assert attempts.status_code == 200
    page = attempts.content.decode()
    assert "ada" in page and "203.0.113.10" in page


def test_a_success_before_the_limit_resets_the_count():
    get_user_model().objects.create_user("cy", password="right-password")
    client = Client(REMOTE_ADDR="203.0.113.11")
    for _ in range(2):
        for n in range(4):
            assert log_in(client, "cy", f"guess-{n}").status_code == 200
        assert log_in(client, "cy", "right-password").status_code == 302
        client.logout()
