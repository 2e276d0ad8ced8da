"""What let a stream in, checked again while it stays open.

A stream is authenticated once, when it connects, and may then stay open for hours: a
revoked token, a deactivated user or a logged-out session must not keep receiving every job
object. The hub checks the credentials of all its streams together on each keep-alive beat
(`jobs.live.hub.EventHub`), so a check costs at most three queries per process whatever the
number of streams, and an event costs none.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from jobs.models import ApiToken


@dataclass(frozen=True, slots=True)
class TokenCredential:
    token_id: int


@dataclass(frozen=True, slots=True)
class SessionCredential:
    session_key: str
    user_id: int
    # The user's session hash when the stream connected: it changes with the password, which
    # ends the user's other sessions (Django's `get_user` no longer accepts them).
    auth_hash: str


Credential = TokenCredential | SessionCredential


def still_held(credentials: Collection[Credential]) -> set[Credential]:
    """Those of `credentials` that a new request would still accept: the token exists and
    its user is active; the session exists, has not expired (sessions are in the database,
    Django's default engine) and its user is active with the same password."""
    held: set[Credential] = set()
    tokens = {c.token_id: c for c in credentials if isinstance(c, TokenCredential)}
    if tokens:
        kept = ApiToken.objects.filter(pk__in=tokens, user__is_active=True)
        held.update(tokens[pk] for pk in kept.values_list("pk", flat=True))
    sessions = [c for c in credentials if isinstance(c, SessionCredential)]
    if sessions:
        live_keys = set(
            Session.objects.filter(
                session_key__in=[c.session_key for c in sessions], expire_date__gt=timezone.now()
            ).values_list("session_key", flat=True)
        )
        users = get_user_model().objects.filter(
            pk__in={c.user_id for c in sessions}, is_active=True
        )
        hashes = {user.pk: user.get_session_auth_hash() for user in users.only("password")}
        held.update(
            c
            for c in sessions
            if c.session_key in live_keys and hashes.get(c.user_id) == c.auth_hash
        )
    return held
