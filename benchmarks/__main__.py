"""`make benchmark`: one run, one side-by-side table.

    python -m benchmarks [--peers huey,celery,procrastinate] [--rows N] [sizes...]

Runs on the servers of DATABASE_URL / REDIS_URL but in databases of its own (created
afresh each run, never the one in DATABASE_URL): `scheduler_bench` for the empty-table
figures, `scheduler_bench_history` for `--rows`; Redis database 13 and an events channel
of its own. Each system is measured by a subprocess that prints JSON (the peers' from
the `.bench/peers` virtualenv); this process only prepares, collects and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from benchmarks import table
from benchmarks.floor import Floor
from benchmarks.workload import Sizes, measure

BASE_DIR = Path(__file__).resolve().parent.parent
PEERS = ("procrastinate", "huey", "celery")
PEERS_PYTHON = BASE_DIR / ".bench" / "peers" / "bin" / "python"
DEFAULT_OUTPUT = BASE_DIR / "benchmarks" / "results.md"
README = BASE_DIR / "README.md"
# The README shows the last run's tables between these lines (`make benchmark-readme`).
README_START = "<!-- benchmarks/results.md, copied by `make benchmark-readme` -->"
README_END = "<!-- end of benchmarks/results.md -->"
# How many times the volume table measures the hot path on each table, in turn.
HOT_PATH_PASSES = 2


def _peers(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PEERS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected peers among {', '.join(PEERS)} separated by commas, got {value!r}"
        )
    return names


def parse_args(argv: list[str]) -> argparse.Namespace:
    defaults = Sizes()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--rows", type=int, default=0, help="jobs of history for the volume table (0: none)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="with --rows: also drain while the worker prunes a tenth of the history"
        " (consumes it: the next run seeds afresh)",
    )
    parser.add_argument(
        "--peers", type=_peers, default=[], help="peers to add, e.g. huey,celery,procrastinate"
    )
    parser.add_argument("--enqueue", type=int, default=defaults.enqueue, help="single enqueues")
    parser.add_argument(
        "--batch", type=int, default=defaults.batch, help="jobs in the batch enqueue"
    )
    parser.add_argument("--drain", type=int, default=defaults.drain, help="jobs drained")
    parser.add_argument("--probes", type=int, default=defaults.probes, help="latency probes")
    parser.add_argument(
        "--seconds", type=float, default=defaults.seconds, help="cap of each measure"
    )
    parser.add_argument("--http-seconds", type=float, default=defaults.http_seconds)
    parser.add_argument("--http-clients", type=int, default=defaults.http_clients)
    parser.add_argument(
        "--database", default="scheduler_bench", help="database name (created afresh)"
    )
    parser.add_argument("--redis-db", type=int, default=13, help="Redis database number")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of the tables: where a job's time goes (needs py-spy in .bench/peers)",
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="where the tables are written"
    )
    parser.add_argument(
        "--readme",
        action="store_true",
        help="measure nothing: copy the tables of --output into README.md",
    )
    args = parser.parse_args(argv)  # fmt: skip
    if args.rows < 0:
        parser.error(f"--rows must be 0 or more, got {args.rows}")
    for name in ("enqueue", "batch", "drain", "probes", "seconds", "http_seconds", "http_clients"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be more than 0")
    if args.database == urlsplit(os.environ.get("DATABASE_URL", "")).path.lstrip("/"):
        parser.error("--database must not be the database of DATABASE_URL: it is dropped")
    return args


def sizes_of(args: argparse.Namespace) -> Sizes:
    return Sizes(
        enqueue=args.enqueue,
        batch=args.batch,
        drain=args.drain,
        probes=args.probes,
        seconds=args.seconds,
        http_seconds=args.http_seconds,
        http_clients=args.http_clients,
    )


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def with_redis_db(url: str, db: int) -> str:
    """The same Redis server, database `db` (a path for redis://, `?db=` for unix://)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        # urlunsplit would drop the empty host of unix:///path.
        query = {**dict(parse_qsl(parts.query)), "db": str(db)}
        return f"unix://{parts.netloc}{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


def recreate_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def history_jobs(url: str) -> int | None:
    """Jobs of history already in the history database, or None when it is missing."""
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE type NOT IN ('bench_noop', 'bench_probe')"
            ).fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


def run_json(command: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    say(f"{what} ...")
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own modules, fixed arguments
        command, env=env, cwd=BASE_DIR, stdout=subprocess.PIPE, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"benchmark: {what} failed with exit code {done.returncode}")
    say(f"{what}: {time.perf_counter() - started:.0f} s")
    return json.loads(done.stdout.strip().splitlines()[-1])


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], env=env, cwd=BASE_DIR, check=True)  # noqa: S603


def say(message: str) -> None:
    print(f"[benchmark {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def environment(database_url: str, redis_url: str) -> dict[str, str]:
    """What every process of the run gets: the project as deployed (DEBUG off), the
    benchmark's job types installed like a user's app, the bench databases."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "SCHEDULER_EXTRA_APPS": "benchmarks",
        "SCHEDULER_EVENTS_CHANNEL": "scheduler_bench:events",
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(BASE_DIR),
    }


def machine(database_url: str, redis_url: str) -> str:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    import redis

    redis_version = redis.Redis.from_url(redis_url).info("server")["redis_version"]
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, PostgreSQL {row[0] if row else '?'}, "
        f"Redis {redis_version}; load average at start {load}"
    )


def history_tables(
    args: argparse.Namespace,
    base: str,
    redis_url: str,
    sizes_json: str,
    project: dict[str, Any],
    bench_url: str,
) -> list[str]:
    """The defaults over `--rows` jobs of history beside the empty table (and while pruning)."""
    # One database per size, kept between runs: seeding 10M rows takes minutes.
    history_url = with_database(base, f"{args.database}_history_{args.rows}")
    # The history is kept whole (the pruner would eat it) unless --prune measures exactly that.
    history_env = {**environment(history_url, redis_url), "SCHEDULER_RETAIN_COMPLETED": "0"}
    if history_jobs(history_url) != args.rows:
        say(f"database {args.database}_history_{args.rows}: created afresh, {args.rows:,} jobs")
        recreate_database(history_url)
        manage(history_env, "migrate", "--noinput", "--verbosity", "0")
        manage(history_env, "seed_history", "--rows", str(args.rows), "--force")
    else:
        manage(history_env, "migrate", "--noinput", "--verbosity", "0")
    # The hot path on the empty table and over the history in turn, twice (E H E H): a
    # change of the machine's load between the two weighs on both sides alike. A single
    # pass each, minutes apart on a shared machine, once put the history 6x ahead.
    hot: dict[str, list[dict[str, Any]]] = {"empty": [], "history": []}
    for side in ("empty", "history") * HOT_PATH_PASSES:
        hot[side].append(
            run_json(
                [sys.executable, "-m", "benchmarks.project", sizes_json, "--hot"],
                history_env if side == "history" else environment(bench_url, redis_url),
                f"the hot path, {'over the history' if side == 'history' else 'empty table'}",
            )["rows"][table.DEFAULTS]
        )
    full = run_json(
        [sys.executable, "-m", "benchmarks.project", sizes_json, "--pages"]
        + (["--prune"] if args.prune else []),
        history_env,
        f"the pages over {args.rows:,} jobs of history",
    )
    empty = {**table.middle(hot["empty"]), **project["pages"]}
    lines = [
        f"The project at its defaults over {args.rows:,} jobs of history (`seed_history`);"
        f" the hot path measured {HOT_PATH_PASSES} times on each table in turn (the middle"
        " figure of each side)",
        "",
        *table.history(empty, {**table.middle(hot["history"]), **full["pages"]}, args.rows),
        "",
    ]
    if "pruning" in full:
        lines += [
            f"One default worker draining rounds of {args.drain:,} jobs over {args.rows:,} jobs"
            " of history, while its pruner deletes the oldest tenth (with attempts and logs)",
            "",
            *table.pruning(full["pruning"]),
            "",
        ]
    return lines


def copy_to_readme(results: Path, readme: Path) -> None:
    """Put the last run's tables (results.md but its title) between the README's markers."""
    text = readme.read_text(encoding="utf-8")
    before, start, rest = text.partition(README_START)
    _, end, after = rest.partition(README_END)
    if not (start and end):
        raise SystemExit(f"{readme.name} has no lines {README_START!r} ... {README_END!r}")
    tables = results.read_text(encoding="utf-8").split("\n", 1)[1].strip()
    readme.write_text(f"{before}{start}\n{tables}\n{end}{after}", encoding="utf-8")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.readme:
        copy_to_readme(args.output, README)
        say(f"{args.output} copied into {README}")
        return 0
    sizes = sizes_of(args)
    base = os.environ["DATABASE_URL"]
    redis_url = with_redis_db(os.environ["REDIS_URL"], args.redis_db)
    bench_url = with_database(base, args.database)
    env = environment(bench_url, redis_url)
    started = time.perf_counter()

    say(f"database {args.database}: created afresh, migrated")
    recreate_database(bench_url)
    manage(env, "migrate", "--noinput", "--verbosity", "0")
    if args.rows:
        # The pages are timed as deployed (DEBUG off): their static files are collected ones.
        manage(env, "collectstatic", "--noinput", "--verbosity", "0")
    header = machine(bench_url, redis_url)
    sizes_json = json.dumps(sizes.as_dict())
    if args.profile:
        say("where a job's time goes ...")
        print(f"Measured {header}.\n")
        command = [sys.executable, "-m", "benchmarks.profile", str(args.enqueue), str(args.drain)]
        subprocess.run([*command, "--tuned"], env=env, cwd=BASE_DIR, check=True)  # noqa: S603
        return 0

    systems: dict[str, dict[str, Any]] = {}
    say("bare SQL floor ...")
    systems.update(
        measure(Floor(bench_url, redis_url), sizes, {table.FLOOR: "defaults"}, single=False)
    )
    project = run_json(
        [sys.executable, "-m", "benchmarks.project", sizes_json, "--measure", "--http", "--tuned"]
        + (["--pages"] if args.rows else []),
        env,
        "the project",
    )
    systems.update(project["rows"])
    systems[table.FLOOR]["single_enqueue"] = project["floor_single_enqueue"]
    for peer in args.peers:
        systems.update(
            run_json([str(PEERS_PYTHON), "-m", "benchmarks.peers", peer, sizes_json], env, peer)[
                "rows"
            ]
        )

    lines = [
        "# Benchmark",
        "",
        f"Measured {header}. `python -m benchmarks {' '.join(argv)}`"
        f" ({time.perf_counter() - started:.0f} s);"
        f" sizes: {sizes_json}.",
        "",
        *table.side_by_side(systems),
        "",
    ]
    if args.rows:
        lines += history_tables(args, base, redis_url, sizes_json, project, bench_url)
    report = "\n".join(lines)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")
    say(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
