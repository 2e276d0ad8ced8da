"""Django's PostgreSQL backend, except for the health check of its connection pool, how
soon the pool reconnects after an outage (`RECONNECT_TIMEOUT`), and its first connection.

Django checks a pooled connection with psycopg_pool's `check_connection`, an empty statement
sent to the server each time a connection is borrowed: for the API, one round trip in three
of every request (the token's statement and the job's are the others), paid by the web
process and by PostgreSQL, and a context switch of each, on a machine whose cores the
requests share. Here a connection is sent that statement only when its socket has something
to read. A connection idle in the pool has nothing to read unless the server closed it (a
restart, a terminated backend, a timeout): then the socket is readable (the server's FATAL
notice, or the end of the stream), the check's statement fails, and the pool replaces the
connection before any request sees it, as before. A notice or a notification waiting on a
live connection makes it readable too; the statement then reads it and passes.

A pool is opened only once a connection made without it has succeeded. Opened, the pool
retries a failed connection in the background while its borrower waits up to the pool's
timeout: worth it in an outage of a database that was there (a restart, a failover), only a
delay where it never was (a database not created, a port nothing listens on, a wrong
password), which the server answers at once. Every `manage.py` command waited those 10 s,
then ended on the pool's "couldn't get a connection"; the server's refusal is now raised at
once, and a web process's first request, while its pool is not open, gets its 503 as soon.
The cost: one connection more, once per process.
"""

from __future__ import annotations

import select
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg import Connection, OperationalError
from psycopg.pq import ConnStatus
from psycopg_pool import ConnectionPool, PoolTimeout

# How long the pool retries one connection before it gives that attempt up (psycopg_pool's
# `reconnect_timeout`, whose delays double from one second). At its default, five minutes,
# the delays grew with the outage, so the first attempt after PostgreSQL came back could
# be as late as the outage was long: after 45 s down, the API answered 503 for another
# 16 s (`make faults`). Given up sooner, the attempt is started again as soon as a request
# waits for a connection, with its first delays: at most a few seconds after the database
# is back. `DATABASES[...]["OPTIONS"]["pool"]` may set another.
RECONNECT_TIMEOUT = 5.0


def check_connection(connection: Connection[Any]) -> None:
    """Raise when `connection` cannot be lent; a round trip only when its socket is readable."""
    if connection.pgconn.status != ConnStatus.OK:
        raise OperationalError("the connection is closed")
    readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    if readable:
        ConnectionPool.check_connection(connection)


class DatabaseWrapper(base.DatabaseWrapper):
    # Django's, which django-stubs do not declare: the pools of the process, by alias.
    _connection_pools: dict[str, ConnectionPool[Any]]

    @property
    def pool(self) -> ConnectionPool[Any] | None:
        """Django's pool (`DATABASES[...]["OPTIONS"]["pool"]`), one per alias and process,
        whose check is `check_connection` when CONN_HEALTH_CHECKS is on."""
        options = self.settings_dict["OPTIONS"].get("pool")
        if not options or self.alias == NO_DB_ALIAS:
            return None
        if self.alias not in self._connection_pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            kwargs = {**self.get_connection_params(), "autocommit": True}
            pool = ConnectionPool(
                kwargs=kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]  # stubs lag
                check=check_connection if self.settings_dict["CONN_HEALTH_CHECKS"] else None,
                **{"reconnect_timeout": RECONNECT_TIMEOUT, **({} if options is True else options)},
            )
            self._connection_pools.setdefault(self.alias, pool)
        return self._connection_pools[self.alias]

    def get_new_connection(self, conn_params: dict[str, Any]) -> Connection[Any]:
        pool = self.pool
        if pool is not None and pool.closed:
            Connection.connect(**conn_params).close()
        try:
            return super().get_new_connection(conn_params)
        except PoolTimeout as timeout:
            # The pool says only that it waited: why its connections failed went to its log
            # as warnings.
            raise OperationalError(f"{timeout}: {_why_unreachable(conn_params)}") from timeout


def _why_unreachable(conn_params: dict[str, Any]) -> str:
    """What a connection of its own meets now: the server's refusal (a database that does
    not exist, a role, a password) or the network's."""
    try:
        Connection.connect(**{**conn_params, "connect_timeout": 2}).close()
    except OperationalError as error:
        return str(error).strip()
    return "a connection of its own succeeded just after (the server was busy, or back)"
