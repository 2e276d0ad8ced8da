"""Who a request comes from: the one definition of a client's address, used by the API's
rate limits, the failed-token limit and the login lockout."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The address of the client, seen through `TRUSTED_PROXIES` proxies of ours.

    Each trusted proxy appends the address it got the request from to X-Forwarded-For, so
    the client is the entry the outermost one wrote: the TRUSTED_PROXIES-th from the end.
    Entries before it came from the client and prove nothing; with no trusted proxy the
    header is ignored and the connection's own address is the client.
    """
    remote = str(request.META.get("REMOTE_ADDR") or "")
    proxies = settings.TRUSTED_PROXIES
    if proxies <= 0:
        return remote
    forwarded = [
        entry.strip()
        for entry in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")
        if entry.strip()
    ]
    if not forwarded:
        return remote
    return forwarded[-min(proxies, len(forwarded))]
