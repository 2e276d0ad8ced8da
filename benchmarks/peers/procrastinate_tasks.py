"""Procrastinate (PostgreSQL):
`procrastinate --app benchmarks.peers.procrastinate_tasks.app worker`."""

import os
import time
from typing import Any

from procrastinate import App, PsycopgConnector

from benchmarks.probes import record_start

app = App(connector=PsycopgConnector(conninfo=os.environ["DATABASE_URL"]))


@app.task(name="noop")
def noop() -> None:
    pass


@app.task(name="probe")
def probe(payload: dict[str, Any]) -> None:
    started = time.time()
    record_start(os.environ["REDIS_URL"], payload, started)
