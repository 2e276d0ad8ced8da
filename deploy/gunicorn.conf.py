"""gunicorn's settings for the production profile (`make prod`, deploy/Procfile, the systemd
unit). Each can be overridden on the command line or in GUNICORN_CMD_ARGS.

gunicorn is the supervisor of the web processes (it restarts one that dies, replaces them all
gracefully on SIGHUP, stops them gracefully on SIGTERM); each process is a uvicorn worker
(`scheduler_project.server.UvicornWorker`) serving the ASGI application, event streams
included. See ARCHITECTURE.md, "The production profile".
"""

import os
from pathlib import Path

from dotenv import load_dotenv

from scheduler_project.environment import env_int

# As the settings do, which gunicorn reads only later, in its processes: WEB_CONCURRENCY and
# PORT may be set in `.env` too (a real environment variable wins).
load_dotenv(Path(__file__).resolve().parent.parent / ".env", override=False)

wsgi_app = "scheduler_project.asgi:application"
worker_class = "scheduler_project.server.UvicornWorker"
# One process per core: each runs a request's Python on one core at a time (the GIL), and
# waits on PostgreSQL in threads. WEB_CONCURRENCY is gunicorn's own variable.
workers = env_int("WEB_CONCURRENCY", os.cpu_count() or 2, minimum=1)
# Each worker listens on a socket of its own (SO_REUSEPORT), so the kernel spreads new
# connections over them. On one shared socket, the worker whose loop woke first accepted every
# connection waiting: of 20 keep-alive API clients that connected together, 17 to 20 landed
# on one worker in 6 of 10 tries, which then served what one core can while the other idled.
# The cost: connections still waiting in a stopping worker's queue are reset (Linux 5.14+
# moves them to a live worker with `sysctl net.ipv4.tcp_migrate_req=1`).
reuse_port = True
# Its master then holds no socket, so its "Listening at" line named no address: this logger
# names the addresses the workers bind.
logger_class = "scheduler_project.server.Logger"
# A worker whose event loop is blocked this long is killed and replaced.
timeout = 30
# Seconds a stopping worker gives its requests, event streams included, before closing them
# (EventSource reconnects to another worker).
graceful_timeout = 10
keepalive = 5
# Listen on $PORT when set (as platforms behind a Procfile expect), else on 127.0.0.1:8000.
_port = env_int("PORT", 0, minimum=1, maximum=65535)
bind = [f"0.0.0.0:{_port}" if _port else "127.0.0.1:8000"]
accesslog = None
errorlog = "-"
# No gunicornc control socket (it would live in $HOME, shared by every instance).
control_socket_disable = True
