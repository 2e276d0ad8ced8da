"""Celery (Redis broker, no result backend): `celery -A benchmarks.peers.celery_tasks worker`."""

import os
import time
from typing import Any

from celery import Celery

from benchmarks.probes import record_start

QUEUE = "scheduler-bench"
app = Celery("scheduler-bench", broker=os.environ["REDIS_URL"])
app.conf.task_default_queue = QUEUE
app.conf.task_ignore_result = True
app.conf.worker_hijack_root_logger = False


@app.task
def noop() -> None:
    pass


@app.task
def probe(payload: dict[str, Any]) -> None:
    started = time.time()
    record_start(os.environ["REDIS_URL"], payload, started)
