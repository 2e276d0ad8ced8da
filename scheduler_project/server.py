"""The production web server: gunicorn supervising uvicorn workers (deploy/gunicorn.conf.py).

`UvicornWorker` is uvicorn-worker's, configured for this project:

- uvloop and httptools (the fast parser), no lifespan (Django has none), no access log
  (`jobs.api.middleware` writes one line per request, with its request id), no proxy-header
  rewriting (`jobs.api.clients.client_address` is the one reader of `X-Forwarded-For`,
  behind `TRUSTED_PROXIES`), and gunicorn's `graceful_timeout` as uvicorn's own.
- `Server`: a stopping worker ends its event streams first (`jobs.live.hub.close_streams`).
  They never end by themselves, so every open console held a stop (a deploy, a restart,
  Ctrl-C of `make prod`) for the whole graceful timeout; browsers reconnect on their own.
- `LimitedHttpToolsProtocol`: httptools has no limit on the request line or the headers, and
  uvicorn sets none, so a client could make a worker buffer megabytes. The limits are
  daphne's (Twisted's 16 KiB per line, `scheduler_project.daphne_limits`), answered the same
  way: 414 for the request line, 431 for a header line or the whole head over 64 KiB, in the
  API's error envelope with a request id of its own (as every answer has), then the
  connection is closed.
- `Logger`: with a socket per worker (`reuse_port`, deploy/gunicorn.conf.py), gunicorn's
  master holds none, and its start-up line named no address ("Listening at:  (pid)"):
  it names the addresses the workers bind.
- The loaded application is moved out of the garbage collector's sight (`gc.freeze()`)
  before serving: a full collection otherwise walked its ~150,000 objects, a 100 ms stop
  of every request in the process about every 2,000 requests (the p99 of the benchmark's
  HTTP enqueue). Collections still find cycles made by requests.
- uvicorn serves the `socket.socket`s inside gunicorn's listeners, not the listeners: when a
  server stops, uvloop detaches a `socket.socket` whose descriptor libuv has closed, but
  calls `close()` on any other object, which closed the descriptor a second time. Every
  stop logged "Error while closing socket [Errno 9] Bad file descriptor" per process, and
  the second close could close whatever another thread (a database connection) had just
  opened under the same number.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import sys
from typing import Any

from gunicorn.arbiter import Arbiter
from gunicorn.glogging import Logger as GunicornLogger
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import Server as UvicornServer
from uvicorn_worker import UvicornWorker as BaseUvicornWorker

MAX_LINE_BYTES = 16 * 1024
MAX_HEAD_BYTES = 64 * 1024


class RequestTooLarge(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message

    def answer(self) -> bytes:
        # Imported here: uvicorn may load this protocol before the Django app is set up.
        from jobs.api.errors import error_body
        from jobs.api.middleware import new_request_id

        body = json.dumps(error_body("request_too_large", self.message)).encode()
        return (
            f"HTTP/1.1 {self.status} {self.reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Request-ID: {new_request_id()}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )


class Pipeline(list[Any]):
    """uvicorn's queue of pipelined requests (`appendleft`, `pop`), as a list: a `deque`
    allocates a 528-byte block when it is made, and the queue is almost always empty."""

    __slots__ = ()

    def appendleft(self, item: Any) -> None:
        self.insert(0, item)


def without_deque(event: asyncio.Event) -> None:
    """Keeps the event's waiters in a list rather than a `deque` (a 760-byte object, most of
    it a 528-byte block allocated when it is made): asyncio.Event only appends, removes and
    iterates them, and a connection's events have one waiter at most."""
    event._waiters = []  # type: ignore[assignment]


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    # Slots, not instance attributes: uvicorn's own fill the class's shared-key dict, and four
    # more would give every connection a dict of its own (1.5 kB each, 0.7 MB for 500 streams).
    __slots__ = ("head_bytes", "header_bytes", "in_head", "refusal")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refusal: RequestTooLarge | None = None
        self.in_head = False
        self.head_bytes = 0
        self.header_bytes = 0
        self.pipeline = Pipeline()  # type: ignore[assignment]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        without_deque(self.flow._is_writable_event)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.in_head, self.head_bytes, self.header_bytes = True, 0, 0

    def on_url(self, url: bytes) -> None:
        # httptools hands the URL over in pieces as they arrive.
        if len(self.url) + len(url) > MAX_LINE_BYTES:
            self.refuse(
                RequestTooLarge(
                    414,
                    "URI Too Long",
                    f"The request line is over {MAX_LINE_BYTES} bytes: shorten the query.",
                )
            )
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        line = len(name) + len(value) + 4  # with ": " and CRLF
        if line > MAX_LINE_BYTES:
            self.refuse(header_too_large(f"A header line is over {MAX_LINE_BYTES} bytes."))
        self.header_bytes += line
        if self.header_bytes > MAX_HEAD_BYTES:
            self.refuse(head_too_large())
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.in_head = False
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous:
            without_deque(self.cycle.message_event)

    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:
            return
        super().data_received(data)
        if self.in_head and self.refusal is None:
            # A header still incomplete sits in httptools' buffer, where on_header cannot
            # see it: count what this message's head has taken so far.
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                self.refusal = head_too_large()
                self.send_400_response("")

    def refuse(self, refusal: RequestTooLarge) -> None:
        """Stop parsing: httptools turns the exception into the parser error that uvicorn
        answers with `send_400_response`, which sends this refusal instead."""
        self.refusal = refusal
        raise refusal

    def send_400_response(self, msg: str) -> None:
        if self.refusal is None:
            super().send_400_response(msg)
            return
        self.transport.write(self.refusal.answer())
        self.transport.close()


def header_too_large(message: str) -> RequestTooLarge:
    return RequestTooLarge(431, "Request Header Fields Too Large", message)


def head_too_large() -> RequestTooLarge:
    return header_too_large(f"The headers are over {MAX_HEAD_BYTES} bytes in all.")


class Server(UvicornServer):
    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Imported here: uvicorn may load this module before the Django app is set up.
        from jobs.live.hub import close_streams

        close_streams()
        await super().shutdown(sockets)


# gunicorn's line (`Arbiter.start`), whose first argument lists the master's sockets.
LISTENING_AT = "Listening at: %s (%s)"


class Logger(GunicornLogger):
    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if msg == LISTENING_AT and args and not args[0]:
            args = (
                ",".join(bound_address(a, self.cfg.is_ssl) for a in self.cfg.address),
                *args[1:],
            )
        super().info(msg, *args, **kwargs)


def bound_address(address: tuple[str, int] | str | int, tls: bool) -> str:
    """A `bind` address (gunicorn's parsed form) written as gunicorn writes a socket's."""
    if isinstance(address, int):
        return f"fd://{address}"
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address
    return f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{port}"


class UvicornWorker(BaseUvicornWorker):
    CONFIG_KWARGS = {
        "loop": "uvloop",
        "http": LimitedHttpToolsProtocol,
        "lifespan": "off",
        "access_log": False,
        "proxy_headers": False,
        "server_header": False,
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config.timeout_graceful_shutdown = int(self.cfg.graceful_timeout)

    def run(self) -> None:
        # gunicorn has loaded the application (Django, the URLs, the ASGI handler) by now.
        gc.freeze()
        super().run()

    async def _serve(self) -> None:
        # uvicorn-worker's, serving with `Server` rather than uvicorn's, and on the sockets
        # gunicorn's listeners wrap rather than on the wrappers (see the module's docstring).
        self.config.app = self.wsgi
        server = Server(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=[listener.sock for listener in self.sockets])
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
