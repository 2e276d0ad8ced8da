"""A TCP proxy a test controls: what goes through it can be cut off and brought back.

Cut off, it closes every connection it carries and drops each new one as soon as it is
accepted, as a broken network path looks to a client (`server closed the connection
unexpectedly`); the server behind it never notices. Upstream is a TCP address or a Unix
socket path, so it also fronts an embedded PostgreSQL that listens only on a socket.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

_CHUNK = 65536


class Proxy:
    def __init__(self, upstream: tuple[str, int] | str) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Break every connection through the proxy, and every new one until `restore()`."""
        with self._lock:
            self._cut = True
            carried, self._open = self._open, set()
        for sock in carried:
            _close(sock)

    def restore(self) -> None:
        self._cut = False

    @contextlib.contextmanager
    def cut_off(self) -> Iterator[None]:
        self.cut()
        try:
            yield
        finally:
            self.restore()

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self.upstream, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            return upstream
        return socket.create_connection(self.upstream)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut:
                _close(client)
                continue
            try:
                upstream = self._connect_upstream()
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._cut:
                    _close(client)
                    _close(upstream)
                    continue
                self._open |= {client, upstream}
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, target), name="proxy-pump", daemon=True
                ).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(_CHUNK):
                target.sendall(chunk)
        except OSError:
            pass
        with self._lock:
            self._open -= {source, target}
        _close(source)
        _close(target)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
