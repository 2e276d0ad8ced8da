"""The console's test clients: a browser session logged in as each role, and a
superuser's admin browser; and the real browser's fixtures, for the `test_browser*.py` modules."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from .browser import (  # noqa: F401 - fixtures, found by pytest here
    browser,
    console_server,
    csp_violations,
    live_server_url,
    open_page,
    page,
)
from .helpers import login


@pytest.fixture
def as_operator(operator: Any) -> Client:
    return login(operator)


@pytest.fixture
def as_viewer(viewer: Any) -> Client:
    return login(viewer)


@pytest.fixture
def admin_browser() -> Client:
    """A superuser's browser: its posts carry the CSRF token of the page they come from."""
    ada = get_user_model().objects.create_superuser("ada", "ada@example.com", "pw-ada")
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    return client
