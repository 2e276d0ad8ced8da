"""Rate limits: requests per user or client address (`API_RATE_LIMIT`), and failed token
attempts per client address (`API_TOKEN_FAILURE_LIMIT`)."""

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from jobs.api.clients import client_address
from jobs.rates import parse_rate


class ConfiguredRateThrottle(SimpleRateThrottle):
    """`API_RATE_LIMIT` (e.g. "100/min") per user or client address; off when empty."""

    scope = "api"

    def get_rate(self) -> str | None:
        return settings.API_RATE_LIMIT or None

    def allow_request(self, request: Request, view: Any) -> bool:
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str:
        ident = request.user.pk if request.user.is_authenticated else self.get_ident(request)
        return f"throttle_{self.scope}_{ident}"

    def get_ident(self, request: Request) -> str:
        return client_address(request)


class TooManyFailedTokens(Throttled):
    """Refused because of the failed token attempts from the client's address, good token or
    not: said so (`message`), since a client sharing the address did nothing wrong itself."""

    def __init__(self, wait: int) -> None:
        self.seconds = wait
        self.message = f"Too many failed token attempts from this address: wait {wait} s."
        super().__init__(wait=wait, detail=self.message)


class FailedTokenAttempts:
    """The failed token attempts of one client address in the current period, counted in
    PostgreSQL (`FailedTokenCount`) by `scheduler_token_attempt` (`schema.sql`), which
    judges the attempts of an address one after another, in the order they come: the token
    lookup of `jobs.api.auth` calls it in its own statement, so a good request pays no round
    trip for it."""

    def __init__(self, request: HttpRequest) -> None:
        rate = settings.API_TOKEN_FAILURE_LIMIT
        self.limit, self.period = parse_rate(rate) if rate else (0, 0)
        self.address = client_address(request)

    def params(self) -> dict[str, Any]:
        """The parameters of `attempt` (no limit: NULL, and nothing is counted)."""
        return {"address": self.address, "failure_limit": self.limit or None, "period": self.period}

    def refuse_if_over_limit(self, failures: int | None) -> None:
        """Refuse this request when `failures`, those of this address it comes after, are
        at the limit: then even a good token is refused, so that guessing learns nothing."""
        if self.limit and (failures or 0) >= self.limit:
            raise TooManyFailedTokens(self.seconds_left())

    def seconds_left(self) -> int:
        """What is left of this address's period: its client may come back then, not a
        whole period after each refused try. Read only when refusing."""
        with connection.cursor() as cursor:
            cursor.execute(SECONDS_LEFT, {"address": self.address})
            row = cursor.fetchone()
        return max(1, int(row[0])) if row else 1

    def fail(self) -> None:
        """Count a failed attempt that had no token to look up, or refuse it over the limit."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {attempt('true')}", self.params())
            (failures,) = cursor.fetchone()
        self.refuse_if_over_limit(failures)


def attempt(failed: str) -> str:
    """The SQL expression counting an attempt whose failure is the SQL expression `failed`:
    the address's failures that the attempt comes after (`FailedTokenAttempts.params`)."""
    return f"scheduler_token_attempt(%(address)s, {failed}, %(failure_limit)s, %(period)s)"


SECONDS_LEFT = """
SELECT ceil(extract(epoch FROM f.period_ends - now())) FROM api_token_failures f
WHERE f.address = %(address)s AND f.period_ends > now()
"""
