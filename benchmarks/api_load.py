"""API load: concurrent clients POSTing jobs to the production profile for a while.

Reports every answer that was not a 201 (an error), throughput, latency, and the most
PostgreSQL connections the server held at once (sampled from pg_stat_activity by the
server's own application_name), next to what its pools allow.

    make load                                   # 20 clients for 60 s
    make load LOAD_ARGS="--clients 50 --seconds 20 --workers 3"

It starts gunicorn with uvicorn workers as `make prod` and deploy/ do (`--workers` web
processes, default 2 for this 2-core machine; DEBUG off) on the database and Redis that
`make test` uses (DATABASE_URL / REDIS_URL, else the machine's or embedded servers), creates
an operator token, and deletes the jobs it created afterwards. The clients are one asyncio
loop writing HTTP/1.1 on keep-alive connections, so the load generator takes little of the
CPU it shares with the server. The test suite runs a short version
(tests/integration/test_api_load.py).
"""

from __future__ import annotations

import argparse
import asyncio
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
# Run as a script (`make load`), this file's folder is on the path, not the project.
sys.path.insert(0, str(ROOT))

from scheduler_project.devservices.processes import free_port  # noqa: E402

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
    workers: int = 1

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
            (
                "pools' maximum (web processes x DATABASE_POOL_MAX_SIZE)",
                f"{self.workers} x {self.pool_max}",
            ),
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


class ServerProcess:
    """A web server subprocess writing to `log_path`."""

    log_path: Path
    process: subprocess.Popen[bytes]
    _log: IO[bytes]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class Daphne(ServerProcess):
    """daphne serving the project on a free port of 127.0.0.1, as `make run` does."""

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


def server_connections(application_name: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


class ProductionServer(ServerProcess):
    """gunicorn with uvicorn workers on a free port of 127.0.0.1, as `make prod` runs it."""

    def __init__(self, env: Mapping[str, str], log_path: Path, workers: int = 2) -> None:
        self.log_path = log_path
        self.workers = workers
        self._log = log_path.open("wb")
        env = {"SECRET_KEY": "api-load-" + uuid.uuid4().hex * 2, **env, "DEBUG": "false"}
        # Each worker binds the address itself (`reuse_port`): a port of 0 would give each
        # one a port of its own.
        self.port = free_port()
        self.process = subprocess.Popen(  # noqa: S603 - our own virtualenv's gunicorn
            [
                *(sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn.conf.py"),
                *("--bind", f"127.0.0.1:{self.port}", "--workers", str(workers)),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90
        while not self.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gunicorn did not start:\n{self.log()}")
            time.sleep(0.2)

    def ready(self) -> bool:
        # Each worker listens once it has loaded the app: wait for every one.
        if self.log().count("Started server process") < self.workers:
            return False
        try:
            return http_get(self.port, "/readyz") == 200
        except OSError:
            return False


def http_get(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


@dataclass
class Outcomes:
    statuses: Counter[int] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)


def post_jobs(*, port: int, token: str, clients: int, seconds: float, job: object) -> Outcomes:
    """`clients` keep-alive connections, each POSTing `job` to /api/v1/jobs back to back for
    `seconds`, from one asyncio loop: a request costs this process a few socket calls."""
    body = json.dumps(job).encode()
    request = (
        f"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    outcomes = Outcomes()

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        length = next(
            (
                int(v)
                for k, _, v in (h.partition(":") for h in lines)
                if k.lower() == "content-length"
            ),
            0,
        )
        await reader.readexactly(length)
        return int(status_line.split()[1])

    async def client(stop_at: float) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            try:
                outcomes.statuses[await asyncio.wait_for(exchange(reader, writer), 30)] += 1
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                outcomes.failures[type(exc).__name__] += 1
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            outcomes.latencies_ms.append((time.perf_counter() - started) * 1000)
        writer.close()

    async def run() -> None:
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(client(stop_at) for _ in range(clients)))

    asyncio.run(run())
    return outcomes


def run_load(
    *, port: int, token: str, clients: int, seconds: float, application_name: str, marker: str
) -> LoadReport:
    """`clients` connections POST noop jobs for `seconds`; meanwhile a thread samples the
    server's database connections."""
    from django.db import connection

    report = LoadReport(clients=clients, seconds=seconds)
    done = threading.Event()

    def sample() -> None:
        try:
            while not done.wait(0.2):
                report.max_connections = max(
                    report.max_connections, server_connections(application_name)
                )
        finally:
            connection.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        job = {"type": "noop", "payload": {"load": marker}, "priority": 2}
        outcomes = post_jobs(port=port, token=token, clients=clients, seconds=seconds, job=job)
    finally:
        done.set()
        sampler.join()
    report.statuses, report.failures = outcomes.statuses, outcomes.failures
    report.latencies_ms = outcomes.latencies_ms
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
    parser.add_argument("--workers", type=int, default=2, help="web processes")
    args = parser.parse_args(argv)

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
    env = {**os.environ, "DATABASE_URL": named(settings.DATABASE_URL, name)}
    server = ProductionServer(env, log, workers=args.workers)
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
    report.workers = args.workers
    print(report.table())
    print(f"server log: {log}")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
