"""Outbound HTTP of `http_request` jobs and webhook deliveries, kept off internal networks.

A job's URL is chosen by whoever may create jobs or webhooks; left alone it could reach the
database, a cloud metadata service or an admin port on the worker's own network. So every
connection goes only to public addresses: the address checked is the one actually
connected to, after DNS resolution, so a name that resolves to a public address when
validated and to 127.0.0.1 when used (DNS rebinding) is refused too. Networks listed in
`OUTBOUND_ALLOWED_NETWORKS` (CIDR, e.g. 10.1.2.0/24) are let through.

Redirects are not followed: a 3xx answer is an HTTPError like any other non-2xx. urllib
follows a 301-303 as a GET without the body, sends every header (a webhook's signature, a
job's Authorization) to whatever host Location names, and the job then completes on that
host's answer; it also follows one to ftp://, through a handler of its own that connects
past the guard. The request goes where its URL says, or fails saying where it was sent.

Environment proxies (http_proxy...) are not used: the guard must see the real target.

The timeout bounds the whole exchange, not each socket operation as urllib's does: a
receiver that drips a byte every few seconds would otherwise hold a handler thread until
the handler's own timeout abandons it (`_Deadline`).
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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


class _Deadline:
    """The end of one exchange: past it, the sockets it opened are shut down, which ends
    whatever read or write waits on them."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._at = time.monotonic() + seconds
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return self._at - time.monotonic()

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):  # closed already
        sock.shutdown(socket.SHUT_RDWR)


def _create_connection(
    address: tuple[str, int],
    timeout: Any = None,
    source_address: Any = None,
    *,
    deadline: _Deadline,
) -> socket.socket:
    """socket.create_connection, to checked addresses only, within `deadline`."""
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
                timeout = min(timeout, deadline.remaining())
            else:
                timeout = deadline.remaining()
            if timeout <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            deadline.track(sock)
            return sock
        except OSError as error:
            sock.close()
            last_error = error
    if last_error is not None:
        raise last_error
    raise TargetRefused(f"refused to connect to {host}: {'; '.join(refused)}")


class _Guarded:
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # HTTPConnection.connect() opens its socket with this (HTTPSConnection's then wraps
        # it in TLS for the URL's host name, so certificates are still checked by name).
        self._create_connection = functools.partial(_create_connection, deadline=deadline)


class _GuardedHTTPConnection(_Guarded, http.client.HTTPConnection):
    pass


class _GuardedHTTPSConnection(_Guarded, http.client.HTTPSConnection):
    pass


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(
            functools.partial(_GuardedHTTPConnection, deadline=self.deadline),
            req,
        )


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(
            functools.partial(_GuardedHTTPSConnection, deadline=self.deadline),
            req,
            context=self._context,  # type: ignore[attr-defined]
        )


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """HTTP and HTTPS through guarded connections, and nothing else: build_opener would add
    the environment's proxies, the redirect handler and the FTP, file and data handlers."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.UnknownHandler(),
        _GuardedHTTPHandler(deadline),
        _GuardedHTTPSHandler(deadline),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


@contextmanager
def urlopen(request: urllib.request.Request, timeout: float) -> Iterator[Any]:
    """urllib.request.urlopen, connecting to permitted addresses only and following no
    redirect (a 3xx answer raises HTTPError). A refused target raises URLError whose reason
    is a TargetRefused. The exchange, what the `with` block reads of the answer included,
    ends within `timeout` seconds, or raises TimeoutError."""
    deadline = _Deadline(timeout)
    opener = _opener(deadline)
    late = TimeoutError(f"timed out: no complete answer within {timeout:g} s")
    try:
        with opener.open(request, timeout=timeout) as response:
            yield response
    except (OSError, http.client.HTTPException) as error:
        # A shut socket shows as whatever the read or write it cut short made of it.
        if deadline.expired:
            raise late from error
        raise
    finally:
        deadline.cancel()
    # A read cut short may also end quietly, as if the answer had ended there.
    if deadline.expired:
        raise late
