"""The lifetime of an embedded server: shared by every local process that needs it, started
by the first and stopped by the last, counted with pids in a file under an flock."""

from __future__ import annotations

import abc
import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from scheduler_project.devservices.processes import pid_alive, say


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class SharedServer(abc.ABC):
    """A server process shared by every local process that needs it, stopped by the last.
    Holders are pids, so a holder killed without stopping (SIGKILL) no longer counts."""

    name = "server"

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self._lock = self.directory.with_name(self.directory.name + ".lock")
        self._holders = self.directory.with_name(self.directory.name + ".holders")

    @property
    @abc.abstractmethod
    def url(self) -> str: ...

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where it is, for the line `make run` prints."""

    @abc.abstractmethod
    def running(self) -> bool: ...

    @abc.abstractmethod
    def _start(self) -> None: ...

    @abc.abstractmethod
    def _stop(self) -> None: ...

    def _live_holders(self) -> list[int]:
        try:
            pids = json.loads(self._holders.read_text())
        except (FileNotFoundError, ValueError):
            return []
        return [pid for pid in pids if isinstance(pid, int) and pid_alive(pid)]

    def start(self) -> None:
        with file_lock(self._lock):
            holders = self._live_holders()
            if not self.running():
                say(f"starting the embedded {self.name} in {self.directory}")
                self._start()
            self._holders.write_text(json.dumps(sorted({*holders, os.getpid()})))

    def stop(self) -> None:
        with file_lock(self._lock):
            others = [pid for pid in self._live_holders() if pid != os.getpid()]
            self._holders.write_text(json.dumps(others))
            if not others and self.running():
                say(f"stopping the embedded {self.name}")
                self._stop()
