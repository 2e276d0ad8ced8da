"""`make run` and `make prod`: set everything up, then run the web server and one worker
until Ctrl-C. `make run` is the development profile (daphne, DEBUG, demo data); `make prod`
the production one (gunicorn with uvicorn workers, DEBUG off, collected static files, a
worker restarted when it exits), on the same servers."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys

from scheduler_project.devservices.paths import data_dir
from scheduler_project.devservices.postgres_server import postgres_connection_kwargs
from scheduler_project.devservices.processes import manage, say
from scheduler_project.devservices.selection import load_dotenv_file, services
from scheduler_project.devservices.supervisor import Supervisor

WEB_HOST = "127.0.0.1"


def database_has_jobs(database_url: str) -> bool:
    import psycopg

    with psycopg.connect(**postgres_connection_kwargs(database_url)) as conn:
        # `jobs` is the table of jobs.models.Job (db_table).
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM jobs)").fetchone()
    return bool(row and row[0])


def banner(
    port: int,
    admin: dict[str, str],
    where: list[str],
    worker_pid: int | None,
    title: str = "The job scheduler is running",
) -> str:
    site = f"http://{WEB_HOST}:{port}"
    token = admin["token"]
    lines = [
        "",
        f"  {title}. Ctrl-C stops all of it.",
        "",
        f"  Console      {site}/",
        f"  Admin        {site}/admin/",
        f"  API docs     {site}/api-docs   (OpenAPI: {site}/api-docs.json)",
        f"  API          {site}/api/v1/",
        "",
        f"  Login        {admin['username']} / {admin['password']}",
        f"               (kept in {admin['credentials_file']})",
        f"  API token    {token}",
        "",
        "  Try:",
        f'    curl -H "Authorization: Bearer {token}" {site}/api/v1/jobs/stats',
        f'    curl -H "Authorization: Bearer {token}" -H "Content-Type: application/json" \\',
        '         -d \'{"type": "noop", "payload": {}, "priority": 1}\' ' + f"{site}/api/v1/jobs",
        "",
        *(f"  {line}" for line in where),
        f"  Worker       manage.py runworker (pid {worker_pid})" if worker_pid else "",
        "",
    ]
    return "\n".join(lines)


def web_port() -> int:
    """WEB_PORT, from the environment or `.env` (loaded here: the port is checked before
    anything starts)."""
    load_dotenv_file()
    raw = os.environ.get("WEB_PORT") or "8000"
    try:
        port = int(raw)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise SystemExit(f"WEB_PORT={raw!r}: expected a port number from 1 to 65535.")
    return port


def free_web_port() -> int:
    port = web_port()
    with contextlib.closing(socket.socket()) as probe:
        try:
            probe.bind((WEB_HOST, port))
        except OSError:
            raise SystemExit(
                f"Port {port} on {WEB_HOST} is in use: stop what uses it, or set WEB_PORT."
            ) from None
    return port


def local_admin(env: dict[str, str], *flags: str) -> dict[str, str]:
    # Given servers, nothing was started in the data directory: it may not exist yet.
    data_dir().mkdir(parents=True, exist_ok=True)
    credentials = data_dir() / "dev-admin.json"
    output = manage(
        env,
        "ensure_dev_admin",
        "--json",
        "--credentials-file",
        str(credentials),
        *flags,
        stdout=subprocess.PIPE,
    )
    return dict(json.loads(output.strip().splitlines()[-1]))


def serve(
    env: dict[str, str],
    port: int,
    admin: dict[str, str],
    where: list[str],
    web: list[str],
    title: str,
    restart_worker: bool,
) -> int:
    supervisor = Supervisor(env)
    supervisor.install_signal_handlers()
    grace = float(env.get("SCHEDULER_SHUTDOWN_GRACE") or 30) + 5
    try:
        supervisor.spawn("web server", web)
        supervisor.spawn(
            "worker", [sys.executable, "manage.py", "runworker"], restart=restart_worker
        )
        if supervisor.wait_for_port(WEB_HOST, port, timeout=60):
            # After the worker's first burst of log lines, not in the middle of it.
            supervisor.pause(2.0)
            worker = supervisor.children["worker"]
            print(banner(port, admin, where, worker.pid, title), flush=True)
        return supervisor.wait()
    finally:
        supervisor.stop(grace)


def run_dev() -> int:
    port = free_web_port()
    with services(prefer_local=False) as (env, where):
        manage(env, "migrate", "--noinput")
        admin = local_admin(env)
        if not database_has_jobs(env["DATABASE_URL"]):
            say("the database has no jobs: seeding the demo jobs")
            manage(env, "seed_db", "--workflows")
        if not env.get("EMAIL_BACKEND"):
            # Printed on the console, the demo jobs' mail would bury the banner.
            env["EMAIL_BACKEND"] = "django.core.mail.backends.filebased.EmailBackend"
            env.setdefault("EMAIL_FILE_PATH", str(data_dir() / "emails"))
            where.append(f"Emails       written to {env['EMAIL_FILE_PATH']}/ (one file each)")
        daphne = [sys.executable, "-m", "daphne", "-b", WEB_HOST, "-p", str(port)]
        return serve(
            env,
            port,
            admin,
            where,
            [*daphne, "scheduler_project.asgi:application"],
            "The job scheduler is running",
            restart_worker=False,
        )


def local_secret_key() -> str:
    """A key of this checkout's own, made once and kept in .data/ (mode 0600)."""
    path = data_dir() / "secret-key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def run_prod() -> int:
    """The production profile on this machine, behind no TLS proxy: so the HTTPS settings
    stay as the environment has them (README, "Production settings", for a real deploy)."""
    port = free_web_port()
    with services(prefer_local=False) as (env, where):
        env["DEBUG"] = "false"
        env["SECRET_KEY"] = env.get("SECRET_KEY") or local_secret_key()
        manage(env, "migrate", "--noinput")
        manage(env, "collectstatic", "--noinput", "--verbosity", "0")
        # The same local admin as `make run` (a real deploy uses createsuperuser instead).
        admin = local_admin(env, "--force")
        gunicorn = [sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn.conf.py"]
        return serve(
            env,
            port,
            admin,
            where,
            [*gunicorn, "--bind", f"{WEB_HOST}:{port}"],
            "The job scheduler is running its production profile",
            restart_worker=True,
        )
