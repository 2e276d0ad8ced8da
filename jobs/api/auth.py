"""Bearer tokens for the API. A token is shown once; only its SHA-256 is stored.

Failed attempts are counted per client address (`jobs.api.throttling.FailedTokenAttempts`):
past `API_TOKEN_FAILURE_LIMIT` in its period, that address gets 429 for the rest of the
period, good token or not, so tokens cannot be guessed at speed. The token's own statement
counts its attempt, in the order the attempts of its address come.
"""

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.models import Model
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from jobs.api.throttling import FailedTokenAttempts, attempt
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


def _columns(model: type[Model], alias: str) -> str:
    return ", ".join(f"{alias}.{field.column}" for field in model._meta.concrete_fields)


# The failed attempts of the client's address in the current period that this attempt comes
# after, counting it when no usable token (one of an active user) has this hash
# (FailedTokenAttempts), and the token, its user and whether the user is in the operators'
# group (the role of jobs.roles.is_operator), in one statement on every API request; one
# row, whose token and user columns are NULL when no usable token has this hash. Each
# model's columns come in the order its fields are declared (what `Model.from_db` takes).
# Written out, and read with a plain cursor, because the ORM spent about 1.4 ms of CPU
# compiling the same lookup (select_related plus an Exists) each time, the largest part of
# a POST's Python, and a raw queryset still 0.1 ms mapping its columns (ARCHITECTURE.md,
# "Where a job's time goes").
USER_BY_KEY_HASH = f"""
SELECT {attempt("t.key_hash IS NULL")} AS failures,
       {_columns(ApiToken, "t")}, {_columns(User, "u")},
       EXISTS (SELECT 1 FROM auth_user_groups ug JOIN auth_group g ON g.id = ug.group_id
               WHERE ug.user_id = u.id AND g.name = %(operators)s) AS in_operators_group
FROM (VALUES (1)) AS one (n)
LEFT JOIN (api_tokens t JOIN auth_user u ON u.id = t.user_id AND u.is_active)
    ON t.key_hash = %(key_hash)s
"""  # noqa: S608 - column names from the models, no input
TOKEN_FIELDS = [field.attname for field in ApiToken._meta.concrete_fields]
USER_FIELDS = [field.attname for field in User._meta.concrete_fields]


def _server_bound_cursor() -> Any:
    """Django's cursor (its query log, its database errors) around psycopg's cursor that
    binds parameters on the server, so that the statement is prepared once it ran
    `prepare_threshold` times on a connection (as `jobs.sql.fetch` does for the core's).
    Django's own cursor binds them in the text: PostgreSQL planned the token's statement on
    every request, 0.16-0.2 ms, where running it takes 0.02-0.05 ms."""
    connection.ensure_connection()
    cursor = ServerBindingCursor(connection.connection)  # type: ignore[call-arg]  # stubs lag
    return connection._prepare_cursor(cursor)  # type: ignore[attr-defined]  # Django wraps it


def token_with_user(
    key_hash: str, attempts: FailedTokenAttempts
) -> tuple[int | None, ApiToken | None]:
    """The failed attempts of the client's address that this one comes after (counting it
    when it fails), and the usable token of this hash with its user, whose
    `in_operators_group` is read along (`jobs.roles.is_operator` then asks nothing more)."""
    params = {"key_hash": key_hash, "operators": OPERATORS_GROUP, **attempts.params()}
    with _server_bound_cursor() as cursor:
        cursor.execute(USER_BY_KEY_HASH, params)
        # Always one row (FROM the VALUES).
        failures, *row = cursor.fetchone()
    if row[0] is None:
        return failures, None
    token = ApiToken.from_db(connection.alias, TOKEN_FIELDS, row[: len(TOKEN_FIELDS)])
    user = User.from_db(connection.alias, USER_FIELDS, row[len(TOKEN_FIELDS) : -1])
    user.in_operators_group = row[-1]  # type: ignore[attr-defined]  # read by jobs.roles
    token.user = user
    return failures, token


class BearerTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != self.keyword.lower():
            # Another scheme is not ours to judge, as DRF's authenticators do: a browser
            # behind a proxy with Basic authentication sends its header on every request,
            # and the console's session must still count (its calls, its event stream).
            return None
        failures = FailedTokenAttempts(request)
        if not token.strip():
            failures.fail()
            raise AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        failed, api_token = token_with_user(hash_token(token.strip()), failures)
        failures.refuse_if_over_limit(failed)
        if api_token is None:
            raise AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if api_token.last_used_at is None or now - api_token.last_used_at >= LAST_USED_PRECISION:
            # To the minute: a write on every request would serialise a busy client's
            # requests on this one row.
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        return api_token.user, api_token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
