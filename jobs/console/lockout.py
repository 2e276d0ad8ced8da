"""The login lockout's authentication backend: django-axes' check, for logins that come
with a request (the console's and the admin's login forms). A login without one (a shell,
Django's test client) has no client address to lock and is left to the next backend,
where django-axes would refuse it outright."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LockoutBackend(AxesStandaloneBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
