"""What every process that loads the project pays at start (each `runworker`, each
`manage.py` command): the apps, without the libraries only some of them use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(*args: str) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "scheduler_project.settings"}
    env.pop("SCHEDULER_EXTRA_APPS", None)
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_loading_the_apps_loads_neither_daphnes_server_nor_pydantic() -> None:
    """Twisted (daphne's server) is for `runserver`, pydantic for a payload declared as a
    type: together a third of a worker's start when loaded with the apps."""
    loaded = run_python(
        "-c",
        "import json, sys, django; django.setup(); "
        "print(json.dumps([m for m in ('twisted', 'daphne.server', 'pydantic') "
        "if m in sys.modules]))",
    )
    assert json.loads(loaded.splitlines()[-1]) == []


def test_runserver_is_daphnes_asgi_server() -> None:
    """`manage.py runserver` still serves the project over ASGI (the event stream holds no
    thread), with daphne's options."""
    usage = run_python("manage.py", "help", "runserver")
    assert "--websocket_handshake_timeout" in usage
    assert "--noasgi" in usage
