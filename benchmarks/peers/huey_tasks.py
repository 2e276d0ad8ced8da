"""Huey (Redis): `huey_consumer benchmarks.peers.huey_tasks.huey`."""

import os
import time
from typing import Any

from huey import RedisHuey

from benchmarks.probes import record_start

huey = RedisHuey("scheduler-bench", url=os.environ["REDIS_URL"])


@huey.task()
def noop() -> None:
    pass


@huey.task()
def probe(payload: dict[str, Any]) -> None:
    started = time.time()
    record_start(os.environ["REDIS_URL"], payload, started)
