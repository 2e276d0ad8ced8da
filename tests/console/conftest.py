"""The console's test clients: a browser session logged in as each role."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from .helpers import login


@pytest.fixture
def as_operator(operator: Any) -> Client:
    return login(operator)


@pytest.fixture
def as_viewer(viewer: Any) -> Client:
    return login(viewer)
