"""API load: concurrent clients POSTing jobs to a real daphne for a while.

Reports every answer that was not a 201 (an error), throughput, latency, and the most
PostgreSQL connections the server held at once (sampled from pg_stat_activity by the
server's own application_name), next to the pool's maximum.

    make load                                   # 20 clients for 60 s
    make load LOAD_ARGS="--clients 50 --seconds 20"

It starts its own daphne on the database and Redis that `make test` uses (DATABASE_URL /
REDIS_URL, else the machine's or embedded servers), creates an operator token, and deletes
the jobs it created afterwards. The test suite runs a short version
(tests/integration/test_api_load.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
DAPHNE = str(Path(sys.executable).with_name("daphne"))


@dataclass
class LoadReport:
    clients: int
    seconds: float
    statuses: Counter[int] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    max_connections: int = 0
    pool_max: int = 0

    @property
    def requests(self) -> int:
        return sum(self.statuses.values()) + sum(self.failures.values())

    @property
    def errors(self) -> int:
        return self.requests - self.statuses[201]

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)] if ordered else 0.0

    def table(self) -> str:
        rows = [
            ("clients x seconds", f"{self.clients} x {self.seconds:g}"),
            ("requests", f"{self.requests:,}"),
            ("errors (anything but 201)", f"{self.errors}"),
            ("requests/s", f"{self.requests / self.seconds:,.1f}"),
            ("latency p50 / p99 / max (ms)", self._latencies()),
            ("server's PostgreSQL connections, most at once", f"{self.max_connections}"),
            ("pool maximum (DATABASE_POOL_MAX_SIZE)", f"{self.pool_max}"),
        ]
        if self.errors:
            detail = {**{str(k): v for k, v in self.statuses.items() if k != 201}, **self.failures}
            rows.append(("errors by kind", json.dumps(detail)))
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)

    def _latencies(self) -> str:
        if not self.latencies_ms:
            return "-"
        p50 = statistics.median(self.latencies_ms)
        return f"{p50:.0f} / {self.percentile(0.99):.0f} / {max(self.latencies_ms):.0f}"


class Daphne:
    """daphne serving the project on a free port of 127.0.0.1, as the README documents."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(  # noqa: S603 - our own virtualenv's daphne
            [DAPHNE, "-e", "tcp:0:interface=127.0.0.1", "scheduler_project.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r"Listening on TCP address 127\.0\.0\.1:(\d+)", self.log())
            if found:
                self.port = int(found.group(1))
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"daphne did not start:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def server_connections(application_name: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def run_load(
    *, port: int, token: str, clients: int, seconds: float, application_name: str, marker: str
) -> LoadReport:
    """`clients` threads, each on its own keep-alive connection, POST noop jobs for
    `seconds`; meanwhile this thread samples the server's connections."""
    from django.db import connection

    report = LoadReport(clients=clients, seconds=seconds)
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    body = json.dumps({"type": "noop", "payload": {"load": marker}, "priority": 2})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            try:
                conn.request("POST", "/api/v1/jobs", body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                outcome: int | str = response.status
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                if isinstance(outcome, int):
                    report.statuses[outcome] += 1
                else:
                    report.failures[outcome] += 1
                report.latencies_ms.append(elapsed)
        conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    try:
        while any(thread.is_alive() for thread in threads):
            report.max_connections = max(
                report.max_connections, server_connections(application_name)
            )
            time.sleep(0.2)
    finally:
        connection.close()
    for thread in threads:
        thread.join()
    return report


def named(database_url: str, application_name: str) -> str:
    """`database_url` whose connections show as `application_name` in pg_stat_activity."""
    parts = urlsplit(database_url)
    query = urlencode([*parse_qsl(parts.query), ("application_name", application_name)])
    return urlunsplit(parts._replace(query=query))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from jobs.api.auth import issue_token
    from jobs.models import Job
    from jobs.roles import Role, assign_role

    run = uuid.uuid4().hex[:8]
    user, _ = get_user_model().objects.get_or_create(username="api-load")
    assign_role(user, Role.OPERATOR)
    token = issue_token(user)
    name = f"api-load-{run}"
    log = ROOT / ".data" / f"api-load-{run}.log"
    log.parent.mkdir(exist_ok=True)
    server = Daphne({**os.environ, "DATABASE_URL": named(settings.DATABASE_URL, name)}, log)
    try:
        report = run_load(
            port=server.port,
            token=token,
            clients=args.clients,
            seconds=args.seconds,
            application_name=name,
            marker=run,
        )
    finally:
        server.stop()
        Job.objects.filter(payload__load=run).delete()
        user.api_tokens.all().delete()
    report.pool_max = settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]
    print(report.table())
    print(f"server log: {log}")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
