"""Rate limits: requests per user or client address (`API_RATE_LIMIT`), and failed token
attempts per client address (`API_TOKEN_FAILURE_LIMIT`)."""

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from jobs.api.clients import client_address

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """Read a rate such as "10/min" as (10, 60): a count per s, min, hour or day, as DRF does."""
    count, _, period = rate.partition("/")
    return int(count), PERIODS[period.strip()[:1]]


class ConfiguredRateThrottle(SimpleRateThrottle):
    """`API_RATE_LIMIT` (e.g. "100/min") per user or client address; off when empty."""

    scope = "api"

    def get_rate(self) -> str | None:
        return settings.API_RATE_LIMIT or None

    def allow_request(self, request: Request, view: Any) -> bool:
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str:
        ident = request.user.pk if request.user.is_authenticated else self.get_ident(request)
        return f"throttle_{self.scope}_{ident}"

    def get_ident(self, request: Request) -> str:
        return client_address(request)


class FailedTokenAttempts:
    """The failed token attempts of one client address in the current period."""

    def __init__(self, request: HttpRequest) -> None:
        rate = settings.API_TOKEN_FAILURE_LIMIT
        self.limit, self.period = parse_rate(rate) if rate else (0, 0)
        self.key = f"api-token-failures:{client_address(request)}"

    def refuse_if_over_limit(self) -> None:
        if self.limit and (cache.get(self.key) or 0) >= self.limit:
            raise Throttled(
                wait=self.period,
                detail=f"Too many failed token attempts from this address: wait {self.period} s.",
            )

    def record(self) -> None:
        if not self.limit:
            return
        # The period starts at the first failure; add() is a no-op when it already runs.
        cache.add(self.key, 0, timeout=self.period)
        try:
            cache.incr(self.key)
        except ValueError:  # the period ended between add() and incr()
            cache.add(self.key, 1, timeout=self.period)
