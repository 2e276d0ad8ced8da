"""`python -m benchmarks.peers NAME SIZES_JSON`: one peer through the workload; prints JSON.

Run from the `.bench/peers` virtualenv with the run's DATABASE_URL and REDIS_URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.probes import client
from benchmarks.workload import Sizes, measure

BIN = Path(sys.executable).parent
LOGS = Path(__file__).resolve().parent.parent.parent / ".bench" / "logs"


def _worker(*command: str) -> subprocess.Popen[bytes]:
    """The peer's worker command; its output goes to .bench/logs/<command>.log."""
    LOGS.mkdir(parents=True, exist_ok=True)
    with (LOGS / f"{command[0]}.log").open("ab") as log:
        return subprocess.Popen(  # noqa: S603 - the peer's own command, fixed arguments
            [str(BIN / command[0]), *command[1:]], stdout=log, stderr=subprocess.STDOUT
        )


class Huey:
    label = "Huey (Redis)"

    def __init__(self) -> None:
        from benchmarks.peers import huey_tasks

        self.tasks = huey_tasks
        self.redis_url = os.environ["REDIS_URL"]
        self.preloaded = 0

    def prepare(self) -> None:
        self.tasks.huey.flush()
        self.preloaded = 0

    def enqueue_one(self) -> None:
        self.tasks.noop()
        self.preloaded += 1

    def enqueue_batch(self, count: int) -> bool:
        return False

    def enqueue_probe(self, payload: dict[str, Any]) -> None:
        self.tasks.probe(payload)

    def start_worker(self, variant: str) -> subprocess.Popen[bytes]:
        return _worker("huey_consumer", "benchmarks.peers.huey_tasks.huey")

    def finished(self) -> int:
        return self.preloaded - self.tasks.huey.pending_count()


class Celery:
    label = "Celery (Redis, prefork)"

    def __init__(self) -> None:
        from benchmarks.peers import celery_tasks

        self.tasks = celery_tasks
        self.redis_url = os.environ["REDIS_URL"]
        self.redis = client(self.redis_url)
        self.preloaded = 0

    def prepare(self) -> None:
        self.redis.delete(self.tasks.QUEUE, "unacked", "unacked_index")
        self.preloaded = 0

    def enqueue_one(self) -> None:
        self.tasks.noop.delay()
        self.preloaded += 1

    def enqueue_batch(self, count: int) -> bool:
        return False

    def enqueue_probe(self, payload: dict[str, Any]) -> None:
        self.tasks.probe.delay(payload)

    def start_worker(self, variant: str) -> subprocess.Popen[bytes]:
        return _worker(
            "celery", "-A", "benchmarks.peers.celery_tasks", "worker", "--loglevel", "WARNING"
        )

    def finished(self) -> int:
        # Taken off the queue and acknowledged (Celery acknowledges as a task starts).
        waiting = self.redis.llen(self.tasks.QUEUE) + self.redis.hlen("unacked")
        return self.preloaded - int(waiting)


class Procrastinate:
    label = "Procrastinate (PostgreSQL)"

    def __init__(self) -> None:
        from benchmarks.peers import procrastinate_tasks

        self.tasks = procrastinate_tasks
        self.redis_url = os.environ["REDIS_URL"]
        self.tasks.app.open()
        connector = self.tasks.app.connector.get_sync_connector()
        exists = connector.execute_query_one(
            query="SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS present"
        )
        if not exists["present"]:
            self.tasks.app.schema_manager.apply_schema()
        self.connector = connector

    def prepare(self) -> None:
        self.connector.execute_query(query="TRUNCATE procrastinate_jobs CASCADE")

    def enqueue_one(self) -> None:
        self.tasks.noop.defer()

    def enqueue_batch(self, count: int) -> bool:
        self.tasks.noop.batch_defer(*({} for _ in range(count)))
        return True

    def enqueue_probe(self, payload: dict[str, Any]) -> None:
        self.tasks.probe.defer(payload=payload)

    def start_worker(self, variant: str) -> subprocess.Popen[bytes]:
        return _worker(
            "procrastinate", "--app", "benchmarks.peers.procrastinate_tasks.app", "worker"
        )

    def finished(self) -> int:
        row = self.connector.execute_query_one(
            query="SELECT count(*) AS n FROM procrastinate_jobs WHERE status = 'succeeded'"
        )
        return int(row["n"])


PEERS: dict[str, type[Huey | Celery | Procrastinate]] = {
    "huey": Huey,
    "celery": Celery,
    "procrastinate": Procrastinate,
}


def main(argv: list[str]) -> dict[str, Any]:
    peer = PEERS[argv[0]]()
    sizes = Sizes(**json.loads(argv[1]))
    return {"rows": measure(peer, sizes, {peer.label: "defaults"})}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
