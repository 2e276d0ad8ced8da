"""Answer over-long request lines under daphne instead of dropping them.

daphne reads requests with Twisted, which closes the connection without a word when the
request line or one header line is over 16 KiB (LineReceiver.MAX_LENGTH): the client sees
a reset, not an error. This answers such a request in the API's error envelope first, with
a request id of its own as every answer has: 414 for the request line (a long query
string), 431 for a header line. The limit stays.
Imported by scheduler_project.asgi, so it applies wherever daphne serves the project.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.web.http import HTTPChannel

from jobs.api.errors import error_body
from jobs.api.middleware import new_request_id


def _answer_line_too_long(channel: HTTPChannel, line: bytes) -> None:
    # Twisted's own flag (name-mangled): true until the request line has been read.
    if getattr(channel, "_HTTPChannel__first_line", True):
        status, reason = 414, "URI Too Long"
        message = f"The request line is over {channel.MAX_LENGTH} bytes: shorten the query."
    else:
        status, reason = 431, "Request Header Fields Too Large"
        message = f"A header line is over {channel.MAX_LENGTH} bytes."
    body = json.dumps(error_body("request_too_large", message)).encode()
    # zope.interface declares ITransport's methods without `self`, which mypy takes for one
    # argument fewer; the transport is set once the connection is made.
    transport: Any = channel.transport
    transport.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-Request-ID: {new_request_id()}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    channel.loseConnection()


HTTPChannel.lineLengthExceeded = _answer_line_too_long  # type: ignore[assignment,method-assign]
