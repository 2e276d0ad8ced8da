"""Outbound HTTP of `http_request` jobs and webhook deliveries, kept off internal networks.

A job's URL is chosen by whoever may create jobs or webhooks; left alone it could reach the
database, a cloud metadata service or an admin port on the worker's own network. So every
connection goes only to public addresses: the address checked is the one actually
connected to, after DNS resolution and on every redirect, so a name that resolves to a
public address when validated and to 127.0.0.1 when used (DNS rebinding) is refused too.
Networks listed in `OUTBOUND_ALLOWED_NETWORKS` (CIDR, e.g. 10.1.2.0/24) are let through.

Environment proxies (http_proxy...) are not used: the guard must see the real target.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# An http(s) URL that http.client will send: no control character or space anywhere (it
# refuses them with InvalidURL, so every attempt would fail); write them %-encoded. A
# lookahead rather than `[^...]+$`: Python's `$` also matches before a final newline.
SENDABLE_URL_PATTERN = "^(?!.*[\\x00-\\x20\\x7f])https?://"
SENDABLE_URL = "an http:// or https:// URL, spaces and control characters %-encoded"


class TargetRefused(OSError):
    """The target's address is not public and not allowed in the settings."""


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(net, strict=False) for net in settings.OUTBOUND_ALLOWED_NETWORKS]


def refusal(address: Address) -> str | None:
    """Why `address` may not be connected to, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if any(address in network for network in allowed_networks()):
        return None
    if address.is_global:
        return None
    return (
        f"{address} is a loopback, private, link-local or reserved address; "
        "add its network to OUTBOUND_ALLOWED_NETWORKS to allow it"
    )


def url_refusal(url: str) -> str | None:
    """Why a URL naming a literal address (or localhost) is refused, checked when a webhook
    is saved; names are checked when connecting, since they may resolve differently then."""
    host = (urlsplit(url).hostname or "").strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return refusal(address)


def _create_connection(
    address: tuple[str, int], timeout: Any = None, source_address: Any = None
) -> socket.socket:
    """socket.create_connection, to checked addresses only."""
    host, port = address
    refused: list[str] = []
    last_error: OSError | None = None
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        why = refusal(ipaddress.ip_address(sockaddr[0]))
        if why is not None:
            refused.append(why)
            continue
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not None and timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as error:
            sock.close()
            last_error = error
    if last_error is not None:
        raise last_error
    raise TargetRefused(f"refused to connect to {host}: {'; '.join(refused)}")


class _Guarded:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # HTTPConnection.connect() opens its socket with this (HTTPSConnection's then wraps
        # it in TLS for the URL's host name, so certificates are still checked by name).
        self._create_connection = _create_connection


class _GuardedHTTPConnection(_Guarded, http.client.HTTPConnection):
    pass


class _GuardedHTTPSConnection(_Guarded, http.client.HTTPSConnection):
    pass


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_GuardedHTTPConnection, req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_GuardedHTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


def urlopen(request: urllib.request.Request, timeout: float) -> Any:
    """urllib.request.urlopen, connecting to permitted addresses only (redirects included).
    A refused target raises URLError whose reason is a TargetRefused."""
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), _GuardedHTTPHandler, _GuardedHTTPSHandler
    )
    return opener.open(request, timeout=timeout)
