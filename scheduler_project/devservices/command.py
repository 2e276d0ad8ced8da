"""`exec`: run one command with the servers' URLs set, then stop what was started for it."""

from __future__ import annotations

import signal
import subprocess

from scheduler_project.devservices.processes import exit_status, manage, say
from scheduler_project.devservices.selection import services


def exec_command(command: list[str], *, prefer_local: bool, migrate: bool) -> int:
    with services(prefer_local=prefer_local) as (env, _where):
        if migrate:
            manage(env, "migrate", "--noinput", "--verbosity", "0")
        try:
            # Same process group as us: a Ctrl-C from the terminal reaches the command
            # directly, so it is not forwarded again (that would count as a second signal).
            child = subprocess.Popen(command, env=env)  # noqa: S603 - the caller's command
        except FileNotFoundError:
            say(f"command not found: {command[0]}")
            return 127
        forwarded = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *forwarded)}
        # Only once the child exists: an ignored SIGINT would be inherited through exec.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in forwarded:
            signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
        try:
            returncode = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return exit_status(returncode)
