"""The web processes' connection pool: a borrowed connection is checked without a statement,
one the server has closed is replaced before anyone uses it, and after an outage the pool is
connected again within seconds of the database's return."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connection

from scheduler_project.postgresql.base import DatabaseWrapper
from tests.faults.proxy import Proxy

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pooled() -> Iterator[DatabaseWrapper]:
    """A Django connection on a pool of one connection, as a web process has (the test
    settings take the pool away from the tests' own connections)."""
    settings_dict = copy.deepcopy(connection.settings_dict)
    settings_dict["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 5.0}
    wrapper = DatabaseWrapper(settings_dict, alias="pool_check")
    try:
        yield wrapper
    finally:
        wrapper.close()
        wrapper.close_pool()


def _backend(wrapper: DatabaseWrapper) -> int:
    wrapper.ensure_connection()
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return int(pid)


def _last_statement(pid: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return "" if row is None else str(row[0])


def test_a_borrowed_connection_is_lent_without_a_statement(pooled):
    pid = _backend(pooled)
    pooled.close()  # back to the pool

    pooled.ensure_connection()  # borrowed again, checked

    # psycopg_pool's own check sends an empty statement, which would be the last one here.
    assert _last_statement(pid) == "SELECT pg_backend_pid()"
    assert _backend(pooled) == pid


def test_a_connection_the_server_closed_is_replaced_before_use(pooled):
    pid = _backend(pooled)
    pooled.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(lambda: _last_statement(pid) == "", what="the backend to exit")

    # No error reaches the borrower: the pool saw the closed socket and connected anew.
    assert _backend(pooled) != pid


def test_a_pool_that_never_connected_says_at_once_why_it_cannot():
    # A command run on a database not created yet waited the pool's timeout, then ended on
    # "couldn't get a connection after 10.00 sec", with why only in the pool's log.
    settings_dict = copy.deepcopy(connection.settings_dict)
    settings_dict["NAME"] = f"{settings_dict['NAME']}_never_created"
    settings_dict["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 60.0}
    wrapper = DatabaseWrapper(settings_dict, alias="pool_no_database")
    started = time.monotonic()
    try:
        with pytest.raises(OperationalError) as refused:
            wrapper.ensure_connection()
    finally:
        wrapper.close_pool()
    assert time.monotonic() - started < 5
    assert f'database "{settings_dict["NAME"]}" does not exist' in str(refused.value)


@contextmanager
def pool_behind_a_proxy(alias: str, max_size: int) -> Iterator[tuple[DatabaseWrapper, Proxy]]:
    """A web process's pool, whose requests give up after one second, reaching PostgreSQL
    through a proxy the test can cut; connected once, its connection given back."""
    db = connection.settings_dict
    proxy = Proxy((db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)))
    settings_dict = copy.deepcopy(db)
    settings_dict.update(HOST="127.0.0.1", PORT=str(proxy.port))
    settings_dict["OPTIONS"]["pool"] = {"min_size": 1, "max_size": max_size, "timeout": 1.0}
    pooled = DatabaseWrapper(settings_dict, alias=alias)
    try:
        _backend(pooled)
        pooled.close()
        yield pooled, proxy
    finally:
        pooled.close()
        pooled.close_pool()
        proxy.close()


def test_a_pool_that_cannot_connect_again_says_why():
    # psycopg_pool's own error says only that it waited; why each connection failed went to
    # its log.
    with pool_behind_a_proxy("pool_cut", max_size=1) as (pooled, proxy):
        proxy.cut()
        with pytest.raises(OperationalError) as lost:
            _backend(pooled)
    said = str(lost.value)
    assert said.startswith("couldn't get a connection after 1.00 sec: ")
    assert "server closed the connection unexpectedly" in said


# Long enough for psycopg_pool's default backoff to wait 16 s between two attempts, from
# 15 s to 31 s after the outage began.
OUTAGE_SECONDS = 20.0


@pytest.mark.slow
def test_after_an_outage_the_pool_connects_again_within_seconds_of_the_database():
    with pool_behind_a_proxy("pool_outage", max_size=2) as (pooled, proxy):
        proxy.cut()
        outage_ends = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < outage_ends:  # requests keep coming, and fail
            with pytest.raises(OperationalError):
                _backend(pooled)
        proxy.restore()
        back = time.monotonic()
        while True:
            try:
                _backend(pooled)
                break
            except OperationalError:
                assert time.monotonic() - back < 30
        # The pool's next attempt came within its first delays, not 11 s later.
        assert time.monotonic() - back < 6
