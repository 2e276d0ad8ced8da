"""The accounts pages served: signing in and out and changing one's password. Django's
password reset pages were served too, linked from nowhere: anyone could have reset mail
sent to any address, unthrottled, and the reset link was written into the access log."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "/accounts/password_reset/",
        "/accounts/password_reset/done/",
        "/accounts/reset/MQ/set-password/",
        "/accounts/reset/done/",
    ],
)
def test_no_password_reset_page_is_served(client: Client, path: str) -> None:
    get_user_model().objects.create_user("rita", email="rita@example.com", password="pw-rita")
    assert client.get(path).status_code == 404
    assert client.post(path, {"email": "rita@example.com"}).status_code == 404
    assert mail.outbox == []


def test_signing_in_out_and_changing_a_password_are_served(client: Client) -> None:
    user = get_user_model().objects.create_user("sam", password="pw-sam-old")
    assert client.get("/accounts/login/").status_code == 200
    signed_in = client.post("/accounts/login/", {"username": "sam", "password": "pw-sam-old"})
    assert signed_in.status_code == 302
    assert client.get("/accounts/password_change/").status_code == 200
    changed = client.post(
        "/accounts/password_change/",
        {
            "old_password": "pw-sam-old",
            "new_password1": "a-new-Passphrase-9",
            "new_password2": "a-new-Passphrase-9",
        },
    )
    assert changed.status_code == 302 and changed["Location"] == "/accounts/password_change/done/"
    user.refresh_from_db()
    assert user.check_password("a-new-Passphrase-9")
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302  # signed out
