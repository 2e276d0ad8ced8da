"""Processes and ports on this machine: running a server's tools, probing what is alive."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from scheduler_project.devservices.paths import BASE_DIR


def say(message: str) -> None:
    print(f"[services] {message}", file=sys.stderr, flush=True)


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port of `host` that nothing listens on now (the system's pick: it may be taken
    before the caller binds it, which on a test machine it is not)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_status(returncode: int) -> int:
    """A child's exit code as a shell reports it: a death by signal n is 128 + n."""
    return 128 - returncode if returncode < 0 else returncode


def run_quietly(command: list[str], *, what: str, log: Path | None = None, **kwargs: Any) -> None:
    """Run a server tool; on failure show its output and the server log, then exit."""
    # A temporary file, not a pipe: a daemon started by the tool may inherit the pipe and
    # keep it open, and reading it would then never end.
    with tempfile.TemporaryFile("w+") as output:
        result = subprocess.run(  # noqa: S603 - fixed binaries from installed wheels
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, check=False, **kwargs
        )
        if result.returncode == 0:
            return
        output.seek(0)
        details = output.read()
    if log is not None and log.exists():
        details += f"\n--- {log} ---\n" + "\n".join(log.read_text().splitlines()[-30:])
    raise SystemExit(f"Could not {what} (exit code {result.returncode}):\n{details}")


def manage(env: dict[str, str], *args: str, stdout: int | IO[str] | None = None) -> str:
    """Run a manage.py command; stop everything if it fails."""
    result = subprocess.run(  # noqa: S603 - our own manage.py with the venv's Python
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        env=env,
        cwd=BASE_DIR,
        stdout=stdout,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"`manage.py {' '.join(args)}` failed with exit code {result.returncode}")
    return result.stdout or ""
