"""Bearer tokens for the API. A token is shown once; only its SHA-256 is stored.

Failed attempts are counted per client address in the cache (Redis): past
`API_TOKEN_FAILURE_LIMIT` in its period, that address gets 429 for the rest of the period,
good token or not, so tokens cannot be guessed at speed. Without Redis nothing is counted.
"""

import hashlib
import secrets
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from jobs.api.throttling import FailedTokenAttempts
from jobs.models import ApiToken

TOKEN_PREFIX = "jsk_"  # noqa: S105 - a marker that makes leaked tokens greppable


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(user: User) -> str:
    """Create a new token for `user` and return it in clear (the only time it exists so)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, key_hash=hash_token(token), prefix=token[:12])
    return token


class BearerTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        failures = FailedTokenAttempts(request)
        failures.refuse_if_over_limit()
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not token.strip():
            failures.record()
            raise AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        api_token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=hash_token(token.strip()))
            .first()
        )
        if api_token is None or not api_token.user.is_active:
            failures.record()
            raise AuthenticationFailed("Invalid or revoked token.")
        ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=timezone.now())
        return api_token.user, api_token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
