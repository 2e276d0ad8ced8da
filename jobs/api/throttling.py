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
    PostgreSQL (`FailedTokenCount`): the token lookup of `jobs.api.auth` reads the count in
    its own statement, so a good request pays no round trip for it."""

    def __init__(self, request: HttpRequest) -> None:
        rate = settings.API_TOKEN_FAILURE_LIMIT
        self.limit, self.period = parse_rate(rate) if rate else (0, 0)
        self.address = client_address(request)

    def refuse_if_over_limit(self, failures: int | None) -> None:
        """Refuse this request when `failures`, the count read for this address, is at the
        limit: then even a good token is refused, so that guessing learns nothing."""
        if self.limit and (failures or 0) >= self.limit:
            raise TooManyFailedTokens(self.seconds_left())

    def seconds_left(self) -> int:
        """What is left of this address's period: its client may come back then, not a
        whole period after each refused try. Read only when refusing."""
        with connection.cursor() as cursor:
            cursor.execute(SECONDS_LEFT, {"address": self.address})
            row = cursor.fetchone()
        return max(1, int(row[0])) if row else 1

    def count(self) -> int | None:
        """The count of this period, for a request that has no token to look up."""
        with connection.cursor() as cursor:
            cursor.execute(CURRENT_FAILURES, {"address": self.address})
            row = cursor.fetchone()
        return row[0] if row else None

    def record(self) -> None:
        if not self.limit:
            return
        with connection.cursor() as cursor:
            # The period starts at the first failure. Ended periods are deleted by whatever
            # failure comes next: the table holds little more than the current periods.
            cursor.execute(DELETE_ENDED_PERIODS, {"address": self.address})
            cursor.execute(RECORD_FAILURE, {"address": self.address, "period": self.period})


# The count of an address's current period; NULL when it has none. Also a subquery of the
# token's statement (jobs.api.auth).
CURRENT_FAILURES = """
SELECT f.failures FROM api_token_failures f
WHERE f.address = %(address)s AND f.period_ends > now()
"""
SECONDS_LEFT = """
SELECT ceil(extract(epoch FROM f.period_ends - now())) FROM api_token_failures f
WHERE f.address = %(address)s AND f.period_ends > now()
"""
DELETE_ENDED_PERIODS = """
DELETE FROM api_token_failures WHERE period_ends <= now() AND address <> %(address)s
"""
RECORD_FAILURE = """
INSERT INTO api_token_failures AS f (address, failures, period_ends)
VALUES (%(address)s, 1, now() + make_interval(secs => %(period)s))
ON CONFLICT (address) DO UPDATE SET
    failures = CASE WHEN f.period_ends > now() THEN f.failures + 1 ELSE 1 END,
    period_ends = CASE WHEN f.period_ends > now() THEN f.period_ends ELSE excluded.period_ends END
"""
