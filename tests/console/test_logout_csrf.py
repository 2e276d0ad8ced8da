"""Logging out from a console page that outlived its CSRF token."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN, LOGOUT = "/accounts/login/", "/accounts/logout/"


def form_token(page: Any, action: str) -> str:
    pattern = rf'<form method="post" action="{action}"[^>]*>(.*?)</form>'
    form = re.search(pattern, page.content.decode(), re.S)
    assert form is not None, action
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(1))
    assert found is not None
    return found.group(1)


def log_in(browser: Client, user: Any) -> None:
    token = form_token(browser.get(LOGIN), LOGIN)
    credentials = {"username": user.username, "password": "pw-" + user.username}
    assert browser.post(LOGIN, {**credentials, "csrfmiddlewaretoken": token}).status_code == 302


def test_log_out_from_a_tab_older_than_the_last_login_says_so_and_offers_it_again(
    operator: Any,
) -> None:
    browser = Client(enforce_csrf_checks=True)
    log_in(browser, operator)
    old_tab = form_token(browser.get("/jobs"), LOGOUT)
    # In another tab: out and in again, which gives the browser a new CSRF token.
    assert browser.post(LOGOUT, {"csrfmiddlewaretoken": old_tab}).status_code == 302
    log_in(browser, operator)

    refused = browser.post(LOGOUT, {"csrfmiddlewaretoken": old_tab})
    # Django's bare CSRF page said nothing a user would understand, and they were still signed
    # in: someone leaving a shared machine believed they had logged out.
    assert refused.status_code == 403
    page = refused.content.decode()
    assert "You are still signed in" in page
    assert browser.get("/jobs").status_code == 200
    again = browser.post(LOGOUT, {"csrfmiddlewaretoken": form_token(refused, LOGOUT)})
    assert again.status_code == 302
    assert browser.get("/jobs")["Location"].startswith(LOGIN)


def test_log_out_without_a_session_or_a_csrf_cookie_lands_on_the_login_page() -> None:
    # Every cookie cleared: the CSRF check fails, and the user is signed out as they asked.
    response = Client(enforce_csrf_checks=True).post(LOGOUT)
    assert (response.status_code, response["Location"]) == (302, LOGIN)
