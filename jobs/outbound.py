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

URLs may be IRIs (`https://例え.テスト/café`), as people write them: `sendable_url` is the one
definition of a URL a request can be sent to, and of what it is sent as (its host through
IDNA, the rest %-encoded as UTF-8). A webhook's URL is checked in full when it is saved, and
an `http_request` job's when it is created: its payload's schema states what a regular
expression can (`SENDABLE_URL_PATTERN`: the scheme, no invisible character), and the type's
check of `url` calls `sendable_url` for the host, which only IDNA can judge. A job stored
before that check fails its attempts naming why.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import re
import socket
import string
import threading
import time
import unicodedata
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import quote, urlsplit

import idna
from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# The characters no URL holds as they are (Unicode's categories Cc, Zs, Zl, Zp and Cf, with
# Cf's code points of Unicode 15 not yet assigned in Python 3.11's 14): controls and spaces,
# which http.client refuses (every attempt would fail), and invisible formatting characters
# (bidi overrides such as U+202E, zero-width characters, tags), which make a URL read as
# another. Each is %-encoded in a path or query; no host name holds one. A test checks the
# ranges against unicodedata.
_UNWRITTEN_RANGES = (
    (0x0000, 0x0020),
    (0x007F, 0x00A0),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x1680, 0x1680),
    (0x180E, 0x180E),
    (0x2000, 0x200F),
    (0x2028, 0x202F),
    (0x205F, 0x2064),
    (0x2066, 0x206F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def _in_pattern(code_point: int) -> str:
    # \uXXXX reads alike in Python's re, jsonschema-rs and ECMA 262 (JSON Schema's dialect);
    # past U+FFFF no escape does, the character itself does.
    return f"\\u{code_point:04x}" if code_point <= 0xFFFF else chr(code_point)


_UNWRITTEN = "[{}]".format(
    "".join(
        _in_pattern(first) if first == last else f"{_in_pattern(first)}-{_in_pattern(last)}"
        for first, last in _UNWRITTEN_RANGES
    )
)
_SCHEME = "https?://"
# What a payload's schema can state of `sendable_url`: the scheme, and no character no URL
# holds as it is. A lookahead rather than `[^...]+$`: Python's `$` also matches before a
# final newline.
SENDABLE_URL_PATTERN = f"^(?!.*{_UNWRITTEN}){_SCHEME}"
SENDABLE_URL = (
    "an http:// or https:// URL without spaces, control characters or invisible formatting "
    "characters such as U+202E (%-encode them)"
)
# A label of a host name written in ASCII: DNS's letters, digits and hyphens, and the
# underscore of many service names.
_ASCII_LABEL_CHARACTER = re.compile("[A-Za-z0-9_-]")
_LONGEST_LABEL = 63
# A port written in digits, which urlsplit takes from 0 to 65535; no server listens on port 0
# (binding it picks another), so a URL naming it was taken and then refused at every attempt.
_PORT = re.compile(r":([0-9]+)\Z")


class UnsendableURL(ValueError):
    """No request can be sent to this URL; the message says why, to whoever wrote it."""


def sendable_url(url: str) -> str:
    """The URL a request to `url` is sent to: its host's labels beyond ASCII through IDNA
    (UTS 46 mapping, then IDNA 2008, as browsers do: `faß.de` is not `fass.de`), every other
    character beyond ASCII %-encoded as UTF-8, the %XX escapes written kept; an ASCII URL
    is sent as written. Raises UnsendableURL naming what no request can carry."""
    if not re.match(_SCHEME, url):
        raise UnsendableURL("Enter an http:// or https:// URL.")
    if unwritten := re.search(_UNWRITTEN, url):
        raise UnsendableURL(
            f"Must not hold {_named(unwritten.group())} (character {unwritten.start() + 1}): "
            "spaces, control characters and invisible formatting characters cannot be sent "
            "as they are; %-encode them in the path or query."
        )
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an unclosed "["
        raise UnsendableURL(f"Its host or port cannot be read: {error}.") from None
    if (written_port := _PORT.search(parts.netloc)) and not 0 < int(written_port[1]) < 2**16:
        raise UnsendableURL(
            f"Its port {written_port[1]} is no port a request can reach: use 1 to 65535, or "
            "leave it out for the scheme's default."
        )
    try:
        parts.port  # noqa: B018 - read for its ValueError: a port that is not a port number
    except ValueError as error:
        raise UnsendableURL(f"Its host or port cannot be read: {error}.") from None
    userinfo, at, host_and_port = parts.netloc.rpartition("@")
    # An IPv6 address ends at its "]" (urlsplit has checked it), a name at the port's ":".
    bracketed = host_and_port.startswith("[")
    host_end = host_and_port.index("]") + 1 if bracketed else len(host_and_port.split(":")[0])
    host, port = host_and_port[:host_end], host_and_port[host_end:]
    if not host:
        raise UnsendableURL(f"Names no host after {parts.scheme}://.")
    sent_host = host if bracketed else _ascii_host(host)
    if url.isascii():
        return url
    rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
    return f"{parts.scheme}://{_escaped(userinfo)}{at}{sent_host}{port}{_escaped(rest)}"


def _ascii_host(host: str) -> str:
    """A host name as DNS is asked for it, or UnsendableURL."""
    try:
        labels = (host if host.isascii() else idna.uts46_remap(host, std3_rules=False)).split(".")
        # A trailing dot (a fully qualified name) ends no label.
        for label in labels[:-1] if len(labels) > 1 and not labels[-1] else labels:
            if why := _ascii_label_problem(label):
                raise UnsendableURL(f"Its host {host!r} {why}.")
        return ".".join(
            label if label.isascii() else idna.alabel(label).decode("ascii") for label in labels
        )
    except idna.IDNAError as error:
        raise UnsendableURL(f"Its host {host!r} is not a name IDNA can encode: {error}.") from None


def _ascii_label_problem(label: str) -> str | None:
    """What is wrong with one label of a host name; beyond ASCII, IDNA judges the rest."""
    if not label:
        return "has an empty label"
    if not label.isascii():
        return None
    if wrong := next((c for c in label if not _ASCII_LABEL_CHARACTER.match(c)), None):
        return f"holds {wrong!r}, which no host name can"
    if len(label) > _LONGEST_LABEL:
        return f"has a label over {_LONGEST_LABEL} characters"
    return None


def _named(character: str) -> str:
    return f"U+{ord(character):04X} {unicodedata.name(character, '')}".rstrip()


def _escaped(text: str) -> str:
    # Only what is beyond ASCII: the ASCII left is sent as written, % and its escapes too.
    return quote(text, safe=string.punctuation)


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
    is saved; names are checked when connecting, since they may resolve differently then.
    `url` as sent (`sendable_url`): 127.0.0.1 written in full-width digits is 127.0.0.1
    once IDNA has mapped it."""
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
