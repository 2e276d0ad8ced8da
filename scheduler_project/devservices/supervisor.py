"""The children of `make run` (web server, worker), started and stopped together."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from scheduler_project.devservices.paths import BASE_DIR
from scheduler_project.devservices.processes import port_open, say


def terminate_with_parent() -> None:
    """In a child of `make run`: get SIGTERM if `make run` dies without cleaning up (SIGKILL),
    so that no web server or worker outlives it. Linux only; elsewhere a no-op."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class Supervisor:
    """The children of `make run`, each in its own session so that Ctrl-C reaches only us,
    and we stop them in order: SIGTERM (the worker finishes running jobs), a second Ctrl-C
    sends SIGTERM again (the worker stops at once), then SIGKILL after the grace period.

    A child spawned with `restart=True` (the worker of `make prod`) is started again when it
    exits, as systemd's `Restart=always` would: `kill <pid>` then restarts it gracefully
    (it finishes its running jobs first). Any other child's exit stops everything."""

    # A child that exits sooner than this after its start cannot start: everything stops
    # rather than restarting it in a loop.
    RESTART_DELAY = 1.0

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.commands: dict[str, list[str]] = {}
        self.restartable: set[str] = set()
        self.started: dict[str, float] = {}
        self.signals = 0

    def spawn(self, name: str, command: list[str], *, restart: bool = False) -> None:
        self.commands[name] = command
        if restart:
            self.restartable.add(name)
        self.started[name] = time.monotonic()
        self.children[name] = subprocess.Popen(  # noqa: S603 - our own commands
            command,
            env=self.env,
            cwd=BASE_DIR,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # preexec_fn is safe here: this process starts no threads.
            preexec_fn=terminate_with_parent,
        )

    def _on_signal(self, _signum: int, _frame: object) -> None:
        self.signals += 1

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def exited(self) -> list[str]:
        return [name for name, child in self.children.items() if child.poll() is not None]

    def wait_for_port(self, host: str, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.signals and not self.exited():
            if port_open(host, port):
                return True
            time.sleep(0.1)
        return False

    def pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.signals and not self.exited():
            time.sleep(0.1)

    def wait(self) -> int:
        """Until a signal or a child's exit; 0 for a requested stop, 1 when a child died."""
        while not self.signals:
            for name in self.exited():
                if name in self.restartable:
                    self.respawn(name)
            if gone := self.exited():
                for name in gone:
                    code = self.children[name].returncode
                    say(f"the {name} exited with code {code}; stopping everything")
                return 1
            time.sleep(0.2)
        return 0

    def respawn(self, name: str) -> None:
        if time.monotonic() - self.started[name] < self.RESTART_DELAY:
            return
        code = self.children[name].returncode
        # Its session may hold subprocesses of its own.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.children[name].pid, signal.SIGKILL)
        self.spawn(name, self.commands[name], restart=True)
        command = " ".join(self.commands[name][1:])
        pid = self.children[name].pid
        say(f"the {name} exited with code {code}; started again: {command} (pid {pid})")

    def stop(self, grace: float) -> None:
        alive = {name: c for name, c in self.children.items() if c.poll() is None}
        if alive:
            say("stopping (Ctrl-C again to stop the worker at once)")
        for child in alive.values():
            child.send_signal(signal.SIGTERM)
        seen_signals = self.signals
        deadline = time.monotonic() + grace
        while any(c.poll() is None for c in alive.values()) and time.monotonic() < deadline:
            if self.signals > seen_signals:
                seen_signals = self.signals
                for child in alive.values():
                    if child.poll() is None:
                        child.send_signal(signal.SIGTERM)
            time.sleep(0.1)
        for child in self.children.values():
            # Whatever is left in a child's session (its own subprocesses included) goes.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
