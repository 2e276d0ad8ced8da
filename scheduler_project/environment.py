"""Reading the environment: a value that cannot work stops the start, naming its variable.
Read later, it would fail far from its cause (a worker's thread pool, a timeout every job
runs over at once). Used by the settings and by gunicorn's configuration (deploy/).

An empty variable means its default, as an unset one does (`.env.example`'s `NAME=` lines),
except for lists and rates, where empty means none."""

from __future__ import annotations

import importlib.util
import ipaddress
import math
import os
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from redis.connection import parse_url

from jobs.rates import parse_rate


def env_str(name: str, default: str) -> str:
    return os.environ.get(name) or default


# The largest count a setting may give: PostgreSQL's bigint, the type of a statement's LIMIT
# (a claim, a feed, a prune). Past it every such statement failed, which the worker logged
# as "database unavailable (DataError: bigint out of range)", retrying without end.
LARGEST_COUNT = 2**63 - 1


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int = LARGEST_COUNT
) -> int:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a whole number.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum}.")
    if value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at most {maximum}.")
    return value


# The longest time span a setting may give, a century: Python's dates end in year 9999, so
# a much longer span overflows once counted back from now (a retention of 1e11 s failed
# every prune pass, 1e14 the dashboard too), and a thread's wait refuses one of ~292 years.
LONGEST_SECONDS = 100 * 365 * 24 * 3600


def env_seconds(
    name: str, default: float, *, minimum: float | None = None, above: float | None = None
) -> float:
    """A time span in seconds, at most `LONGEST_SECONDS`."""
    return env_float(name, default, minimum=minimum, above=above, maximum=LONGEST_SECONDS)


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> float:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number.")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum:g}.")
    if above is not None and value <= above:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be above {above:g}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at most {maximum:g}.")
    return value


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    word = raw.strip().lower()
    if word not in TRUE_WORDS | FALSE_WORDS:
        raise ImproperlyConfigured(
            f"{name}={raw!r}: expected true or false (also 1/0, yes/no, on/off)."
        )
    return word in TRUE_WORDS


def env_list(name: str, default: str) -> list[str]:
    """Comma-separated; empty is the empty list."""
    raw = os.environ.get(name, default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def importable_apps(name: str, apps: list[str]) -> list[str]:
    """`apps`, read from `name`: each an app's package or its AppConfig's dotted path, whose
    top package is on the Python path. Looked up, not imported: an app's package may import
    models, which the settings come before."""
    for app in apps:
        top = app.partition(".")[0]
        # Else Django's start failed with a traceback ending in "No module named '...'".
        if not top or importlib.util.find_spec(top) is None:
            raise ImproperlyConfigured(f"{name}: no module {top!r} on the Python path.")
    return apps


def env_rate(name: str, default: str) -> str:
    """A rate such as "10/min" (`jobs.rates`), or empty for none."""
    raw = os.environ.get(name, default).strip()
    if raw:
        try:
            parse_rate(raw)
        except ValueError as error:
            raise ImproperlyConfigured(f"{name}={raw!r}: {error}.") from None
    return raw


def env_redis_url(name: str, default: str) -> str:
    """A Redis URL redis-py can read (redis://, rediss:// or unix://)."""
    raw = env_str(name, default)
    try:
        parse_url(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name}={raw!r}: {error}.") from None
    return raw


DATABASE_SCHEMES = ("postgres", "postgresql")


def without_password(url: str) -> str:
    """`url` with its password, if any, as *** (for messages)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return url
    if password is None:
        return url
    scheme, _, rest = url.partition("://")
    userinfo, _, host = rest.rpartition("@")
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{host}"


def env_database_url(name: str, default: str) -> str:
    """A PostgreSQL URL (postgres:// or postgresql://) that dj-database-url can read."""
    raw = env_str(name, default)
    shown = without_password(raw)
    try:
        scheme = urlsplit(raw).scheme
    except ValueError:
        scheme = ""
    # dj-database-url would take mysql:// (or anything it knows) for PostgreSQL's engine,
    # which the settings impose: the mistake would show only at the first query.
    if scheme not in DATABASE_SCHEMES:
        raise ImproperlyConfigured(
            f"{name}={shown!r}: expected a postgres:// or postgresql:// URL."
        )
    try:
        database = dj_database_url.parse(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name}={shown!r}: {error}") from None
    # Django would refuse it only at the first query, naming no variable.
    if not database["NAME"] and "service" not in database.get("OPTIONS", {}):
        raise ImproperlyConfigured(
            f"{name}={shown!r}: names no database (postgres://user@host:5432/<database>)."
        )
    return raw


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_log_level(name: str, default: str) -> str:
    """A level name of `logging`, in any case; returned in capitals."""
    raw = env_str(name, default)
    level = raw.strip().upper()
    if level not in LOG_LEVELS:
        raise ImproperlyConfigured(
            f"{name}={raw!r}: expected one of {', '.join(LOG_LEVELS)} (in any case)."
        )
    return level


def redis_database(url: str) -> int:
    """The database number of a Redis URL read by `env_redis_url` (0 when it names none)."""
    return int(parse_url(url).get("db") or 0)


def env_networks(name: str) -> list[str]:
    """Networks in CIDR (10.1.2.0/24), as written."""
    networks = env_list(name, "")
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError as error:
            raise ImproperlyConfigured(f"{name}: {error}.") from None
    return networks
