"""Which PostgreSQL and which Redis a command gets: one rule, applied to each server."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from scheduler_project.devservices.paths import BASE_DIR, data_dir
from scheduler_project.devservices.postgres_server import (
    DATABASE_NAME,
    EmbeddedPostgres,
    create_database,
)
from scheduler_project.devservices.processes import port_open, say
from scheduler_project.devservices.redis_server import EmbeddedRedis
from scheduler_project.devservices.shared import SharedServer

LOCAL_HOST = "127.0.0.1"
LOCAL_DATABASE_URL = f"postgres://postgres@{LOCAL_HOST}:5432/{DATABASE_NAME}"
LOCAL_REDIS_URL = f"redis://{LOCAL_HOST}:6379/0"


def ensure_local_database() -> None:
    """The `scheduler` database on the machine's server, for commands that use it directly
    (the test suite makes its own): best effort, the command reports what is missing."""
    import psycopg

    maintenance_url = LOCAL_DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    try:
        create_database(maintenance_url, DATABASE_NAME)
    except psycopg.Error as error:
        say(f"could not make sure the database {DATABASE_NAME} exists: {error}")


@dataclasses.dataclass(frozen=True)
class Service:
    label: str
    url_variable: str
    local_port: int
    local_url: str
    embedded: Callable[[Path], SharedServer]
    # Under the data directory.
    embedded_directory: str
    prepare_local: Callable[[], None] = lambda: None


SERVICES = (
    Service(
        "PostgreSQL",
        "DATABASE_URL",
        5432,
        LOCAL_DATABASE_URL,
        EmbeddedPostgres,
        "postgres",
        prepare_local=ensure_local_database,
    ),
    Service("Redis", "REDIS_URL", 6379, LOCAL_REDIS_URL, EmbeddedRedis, "redis"),
)


def provide(
    service: Service, env: dict[str, str], *, probe_local: bool, started: list[SharedServer]
) -> str:
    """Set the service's URL in `env`: the one given, else the machine's server when probing
    and it answers, else an embedded one started here (appended to `started`). Returns
    where it is, for the line `make run` prints."""
    if env.get(service.url_variable):
        return f"from {service.url_variable}"
    if probe_local and port_open(LOCAL_HOST, service.local_port):
        env[service.url_variable] = service.local_url
        service.prepare_local()
        return f"this machine's, on {LOCAL_HOST}:{service.local_port}"
    server = service.embedded(data_dir() / service.embedded_directory)
    server.start()
    started.append(server)
    env[service.url_variable] = server.url
    return server.location


def load_dotenv_file() -> None:
    from dotenv import load_dotenv

    load_dotenv(BASE_DIR / ".env", override=False)


@contextlib.contextmanager
def services(*, prefer_local: bool) -> Iterator[tuple[dict[str, str], list[str]]]:
    """The environment for commands that need the servers, and a line per server saying
    where it is. Embedded servers started here stop when the block ends."""
    load_dotenv_file()
    env = dict(os.environ)
    force_embedded = env.get("SCHEDULER_FORCE_EMBEDDED", "").lower() in {"1", "true", "yes"}
    probe_local = prefer_local and not force_embedded
    started: list[SharedServer] = []
    try:
        where = [
            f"{service.label:<12} {provide(service, env, probe_local=probe_local, started=started)}"
            for service in SERVICES
        ]
        yield env, where
    finally:
        for server in reversed(started):
            server.stop()
