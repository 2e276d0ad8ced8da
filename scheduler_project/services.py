"""Find or start the PostgreSQL and Redis that `make run` and `make test` use.

`python -m scheduler_project.services exec -- CMD...` runs CMD with DATABASE_URL and
REDIS_URL set: the ones already in the environment, else the machine's servers on
127.0.0.1:5432 / 6379 when they answer. (Embedded servers for machines without them: to do.)
"""

from __future__ import annotations

import os
import socket
import sys

LOCAL_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/scheduler"
LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def resolve_environment() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("DATABASE_URL"):
        if not port_open("127.0.0.1", 5432):
            raise SystemExit("No DATABASE_URL and nothing listens on 127.0.0.1:5432.")
        env["DATABASE_URL"] = LOCAL_DATABASE_URL
    if not env.get("REDIS_URL"):
        if not port_open("127.0.0.1", 6379):
            raise SystemExit("No REDIS_URL and nothing listens on 127.0.0.1:6379.")
        env["REDIS_URL"] = LOCAL_REDIS_URL
    return env


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "exec" and argv[1] == "--":
        command = argv[2:]
        os.execvpe(command[0], command, resolve_environment())  # noqa: S606
    raise SystemExit("usage: python -m scheduler_project.services exec -- COMMAND [ARGS...]")


if __name__ == "__main__":
    main(sys.argv[1:])
