"""Wrong old passwords on the password change pages count as failed logins (django-axes):
a signed-in session could guess its account's password there without limit, where the
sign-in page locks the user out of that address after `LOGIN_FAILURE_LIMIT` failures."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
PAGES = ["/accounts/password_change/", "/admin/password_change/"]
NEW = "a-new-Passphrase-9"


def change(client: Client, page: str, old: str):
    return client.post(page, {"old_password": old, "new_password1": NEW, "new_password2": NEW})


def signed_in(username: str, address: str) -> tuple[Client, object]:
    # Staff, so that the admin's page is served to it too.
    user = get_user_model().objects.create_user(username, password="right-password", is_staff=True)
    client = Client(REMOTE_ADDR=address)
    client.force_login(user)
    return client, user


@pytest.mark.parametrize("page", PAGES)
def test_wrong_old_passwords_lock_the_user_out_from_that_address(settings, page):
    assert settings.AXES_FAILURE_LIMIT == 5
    session, user = signed_in("pat", "203.0.113.30")
    for n in range(4):
        wrong = change(session, page, f"guess-{n}")
        assert wrong.status_code == 200
        assert "Your old password was entered incorrectly" in wrong.content.decode()
    # The fifth locks the pair out, as a fifth failed login does; then even the right
    # password is refused, here and at the sign-in page.
    for old in ["guess-4", "right-password"]:
        locked = change(session, page, old)
        assert locked.status_code == 429
        assert "Too many failed logins" in locked.content.decode()
    user.refresh_from_db()
    assert user.check_password("right-password")
    login = {"username": "pat", "password": "right-password"}
    assert Client(REMOTE_ADDR="203.0.113.30").post(LOGIN, login).status_code == 429
    assert Client(REMOTE_ADDR="198.51.100.30").post(LOGIN, login).status_code == 302


def test_failed_logins_and_wrong_old_passwords_count_together():
    session, _ = signed_in("quin", "203.0.113.31")
    browser = Client(REMOTE_ADDR="203.0.113.31")
    for n in range(3):
        failed = browser.post(LOGIN, {"username": "quin", "password": f"guess-{n}"})
        assert failed.status_code == 200
    assert change(session, PAGES[0], "guess-3").status_code == 200
    assert change(session, PAGES[0], "guess-4").status_code == 429
    login = {"username": "quin", "password": "right-password"}
    assert browser.post(LOGIN, login).status_code == 429


@pytest.mark.parametrize("page", PAGES)
def test_the_right_old_password_still_changes_it_after_wrong_ones(page):
    session, user = signed_in("rae", "203.0.113.32")
    for n in range(2):
        assert change(session, page, f"guess-{n}").status_code == 200
    changed = change(session, page, "right-password")
    assert changed.status_code == 302 and changed["Location"] == f"{page}done/"
    user.refresh_from_db()
    assert user.check_password(NEW)
    assert session.get(changed["Location"]).status_code == 200  # still signed in
