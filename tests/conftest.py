"""Fixtures shared by every test folder: users with roles, API clients, a Redis listener,
and the environment a worker subprocess needs to reach this test's database."""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient
from schemathesis.pytest.plugin import SchemathesisFunction

from jobs import webhooks
from jobs.api.auth import issue_token
from jobs.events import background_publisher, decode_events
from jobs.roles import Role, assign_role
from jobs.stats import stats_publisher

XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")

pytest_plugins = ["tests.xdist_groups"]


def pytest_configure(config: pytest.Config) -> None:
    settings.PASSWORD_HASHERS = ["tests.passwords.FewRoundsPBKDF2PasswordHasher"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, SchemathesisFunction) and item.operation_label:
            # Schemathesis names each operation's test "<test>[<METHOD path>]", but pytest
            # 9.2 builds a node id from the function's name and a parametrization only: the
            # fuzz's tests shared one id, and xdist, which queues tests by id, ran one of them.
            item._id = item.parent.id.child(item.originalname).with_params(item.operation_label)
    shared = [nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1]
    if shared:
        raise pytest.UsageError(f"tests sharing a node id, of which xdist runs one: {shared}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    # This process runs workers, listeners and servers on threads of its own, whose
    # connections are never handed back to a pool: each would hold a pool slot for good.
    # Connections here are plain ones; the servers the tests start use the pool.
    settings.DATABASES["default"]["OPTIONS"].pop("pool", None)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """The test database as created, whose commits wait for no disk write: every process
    the tests start sees a commit as soon as it is made, as before, but none waits for the
    WAL's fsync. Only a crash of the PostgreSQL server could lose one; `make faults`, which
    crashes servers, runs its own."""
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(
                f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} "
                "SET synchronous_commit = off"
            )
        connection.close()  # the setting holds from the next connection


# What no test changes, and a flush would empty only for post_migrate to write it again.
KEPT_BY_FLUSH = ("django_migrations", "django_content_type", "auth_permission")


@pytest.fixture(scope="session", autouse=True)
def _flush_by_deleting() -> Iterator[None]:
    """A transactional test's teardown empties the database with Django's `flush`: one
    TRUNCATE of every table, 130 ms here however few rows there are (each table and index
    gets new files), then content types and permissions written again (45 ms); about 400
    tests, a minute of the suite. Deleting the rows a test left, with triggers and foreign
    keys off for the flush's transaction, ends in the same state: the tables the counters'
    TRUNCATE triggers empty are among those emptied (every table of the schema, not only
    Django's), and what no test changes is kept. Needs a superuser (the machine's and the
    embedded servers' role); otherwise Django's TRUNCATE."""
    operations = type(connection.ops)
    truncate = operations.sql_flush

    def sql_flush(
        ops: Any, style: Any, tables: Any, *, reset_sequences: bool = False, **options: Any
    ) -> list[str]:
        with ops.connection.cursor() as cursor:
            cursor.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename <> ALL(%s) AND (SELECT rolsuper FROM pg_roles "
                "WHERE rolname = current_user) ORDER BY 1",
                [list(KEPT_BY_FLUSH)],
            )
            emptied = [name for (name,) in cursor.fetchall()]
        if reset_sequences or not emptied:
            return truncate(ops, style, tables, reset_sequences=reset_sequences, **options)
        return [
            "SET LOCAL session_replication_role = replica",
            # The schema's own table names, quoted: nothing a user sent.
            *(f"DELETE FROM {ops.quote_name(name)}" for name in emptied),  # noqa: S608
        ]

    operations.sql_flush = sql_flush
    yield
    operations.sql_flush = truncate


@pytest.fixture
def fresh_webhook_cache() -> Iterator[None]:
    """Each process caches its active webhooks for WEBHOOK_CACHE_SECONDS: a test reads the
    ones it made, not a list an earlier test left."""
    webhooks.active_webhooks.invalidate()
    yield
    webhooks.active_webhooks.invalidate()


@pytest.fixture(scope="session", autouse=True)
def _private_event_channel() -> None:
    # Redis pub/sub ignores database numbers, so each test process gets its own channel.
    # Several checkouts may run their suites at once on one machine, hence the database name.
    test_database = settings.DATABASES["default"]["TEST"]["NAME"]
    settings.SCHEDULER_EVENTS_CHANNEL = f"scheduler:events:test:{test_database}:{XDIST_WORKER}"


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    # Rate-limit counters are per client address, and every test client is 127.0.0.1: each
    # test counts on its own, also in the servers it starts. (Failed token attempts are
    # counted in the database, which each test has to itself.)
    settings.CACHES = {
        **settings.CACHES,
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"},
    }


def make_user(username: str, role: Role | None) -> Any:
    user = get_user_model().objects.create_user(username=username, password="pw-" + username)
    if role is not None:
        assign_role(user, role)
    return user


@pytest.fixture
def operator(db: None) -> Any:
    return make_user("olive-operator", Role.OPERATOR)


@pytest.fixture
def viewer(db: None) -> Any:
    return make_user("victor-viewer", Role.VIEWER)


def token_client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(user)}")
    return client


@pytest.fixture
def operator_client(operator: Any) -> APIClient:
    return token_client(operator)


@pytest.fixture
def viewer_client(viewer: Any) -> APIClient:
    return token_client(viewer)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


@pytest.fixture
def superuser_client(db: None) -> Client:
    """A browser's session of a superuser: the console and the admin."""
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(root)
    return client


class EventListener:
    """Collects what arrives on the events channel, from a real Redis subscription."""

    def __init__(self, url: str, channel: str) -> None:
        self._client = redis.Redis.from_url(url)
        self._pubsub = self._client.pubsub()
        self._pubsub.subscribe(channel)
        # Redis confirms a SUBSCRIBE once it is in place: from then on nothing is missed.
        deadline = time.monotonic() + 5
        while not self._is_confirmation(self._pubsub.get_message(timeout=0.1)):
            assert time.monotonic() < deadline, "Redis did not confirm the SUBSCRIBE"
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _is_confirmation(message: dict[str, Any] | None) -> bool:
        return message is not None and message["type"] == "subscribe"

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.1)
            if message is not None and message["type"] == "message":
                for event in decode_events(message["data"]):
                    self._queue.put(dict(event))

    def wait_for(
        self,
        event_type: str,
        predicate: Callable[[dict[str, Any]], bool] = lambda data: True,
        timeout: float = 5.0,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.received:
            if event["type"] == event_type and predicate(event["data"]):
                return event
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                event = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            self.received.append(event)
            if event["type"] == event_type and predicate(event["data"]):
                return event
        raise AssertionError(f"no {event_type} event within {timeout}s; got {self.types()}")

    def drain(self, seconds: float = 0.3) -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                self.received.append(self._queue.get(timeout=remaining))
            except queue.Empty:
                break
        return self.received

    def types(self) -> list[str]:
        return [event["type"] for event in self.received]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._pubsub.close()
        self._client.close()


@pytest.fixture
def events() -> Iterator[EventListener]:
    # What an earlier test in this process left to publish (a coalesced stats.updated) goes
    # out before the subscription, so the listener hears only this test.
    stats_publisher.flush()
    background_publisher.flush()
    listener = EventListener(settings.REDIS_URL, settings.SCHEDULER_EVENTS_CHANNEL)
    yield listener
    listener.close()


@pytest.fixture
def redis_down(settings: Any) -> None:
    """This process's REDIS_URL points at a closed port of 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"


@pytest.fixture
def subprocess_env(transactional_db: None) -> dict[str, str]:
    """Environment for a `manage.py` subprocess that must see this test's database."""
    return subprocess_environment()


def subprocess_environment() -> dict[str, str]:
    """Environment for a `manage.py` subprocess that must see the test database."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "postgres", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = quote(db["HOST"] or "127.0.0.1", safe="")
    port = db["PORT"] or "5432"
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"postgres://{credentials}@{host}:{port}/{db['NAME']}",
            "REDIS_URL": settings.REDIS_URL,
            "SCHEDULER_EVENTS_CHANNEL": settings.SCHEDULER_EVENTS_CHANNEL,
            "CACHE_KEY_PREFIX": settings.CACHES["default"]["KEY_PREFIX"],
            "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env
