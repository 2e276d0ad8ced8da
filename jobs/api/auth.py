"""Bearer tokens for the API. A token is shown once; only its SHA-256 is stored.

Failed attempts are counted per client address in the cache (Redis): past
`API_TOKEN_FAILURE_LIMIT` in its period, that address gets 429 for the rest of the period,
good token or not, so tokens cannot be guessed at speed. Without Redis nothing is counted.
"""

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from jobs.api.throttling import FailedTokenAttempts
from jobs.models import ApiToken
from jobs.roles import OPERATORS_GROUP

# `last_used_at` is written at most once per this long per token.
LAST_USED_PRECISION = timedelta(minutes=1)

TOKEN_PREFIX = "jsk_"  # noqa: S105 - a marker that makes leaked tokens greppable


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(user: User) -> str:
    """Create a new token for `user` and return it in clear (the only time it exists so)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, key_hash=hash_token(token), prefix=token[:12])
    return token


# The token, its user and whether the user is in the operators' group (the role of
# jobs.roles.is_operator) in one statement, on every API request. Written out because the
# ORM spent about 1.4 ms of CPU compiling the same lookup (select_related plus an Exists)
# each time, the largest part of a POST's Python (ARCHITECTURE.md, "Where a job's time goes").
USER_BY_KEY_HASH = """
SELECT u.*, t.id AS token_id, t.prefix AS token_prefix, t.created_at AS token_created_at,
       t.last_used_at AS token_last_used_at,
       EXISTS (SELECT 1 FROM auth_user_groups ug JOIN auth_group g ON g.id = ug.group_id
               WHERE ug.user_id = u.id AND g.name = %(operators)s) AS in_operators_group
FROM api_tokens t JOIN auth_user u ON u.id = t.user_id
WHERE t.key_hash = %(key_hash)s
"""


# The token's fields and the columns that carry them. Written out rather than built with
# f"token_{name}": CPython's attribute cache keeps the last name strings it was asked for, and
# strings made per request would be kept there, pinning the memory they were made in.
TOKEN_COLUMNS = {
    "id": "token_id",
    "prefix": "token_prefix",
    "created_at": "token_created_at",
    "last_used_at": "token_last_used_at",
}


def token_with_user(key_hash: str) -> ApiToken | None:
    """The token of this hash with its user, whose `in_operators_group` is read along
    (`jobs.roles.is_operator` then asks nothing more)."""
    params = {"key_hash": key_hash, "operators": OPERATORS_GROUP}
    for user in User.objects.raw(USER_BY_KEY_HASH, params):
        token = {name: getattr(user, column) for name, column in TOKEN_COLUMNS.items()}
        return ApiToken(user=user, key_hash=key_hash, **token)
    return None


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
        api_token = token_with_user(hash_token(token.strip()))
        if api_token is None or not api_token.user.is_active:
            failures.record()
            raise AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if api_token.last_used_at is None or now - api_token.last_used_at >= LAST_USED_PRECISION:
            # To the minute: a write on every request would serialise a busy client's
            # requests on this one row.
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        return api_token.user, api_token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
