from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle


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
