"""Settings come from the environment and `.env`, and every knob is documented, with the
default it really has, in .env.example and in README's configuration table."""

from __future__ import annotations

import ast
import functools
import os
import re
import runpy
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from scheduler_project.devservices.postgres_server import EmbeddedPostgres

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "scheduler_project" / "settings.py"
DEVSERVICES = ROOT / "scheduler_project" / "devservices"
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
ENV_FUNCTIONS = {
    "env_str",
    "env_database_url",
    "env_log_level",
    "env_redis_url",
    "env_int",
    "env_float",
    "env_seconds",
    "env_bool",
    "env_list",
    "env_rate",
    "env_networks",
}
TRUE_WORDS = {"1", "true", "yes", "on"}
DEVELOPMENT_KEY = "dev-insecure-secret-key-change-me-in-production-0123456789"


def knobs_read_by_settings() -> dict[str, str]:
    """Every environment variable settings.py reads, with the env_* function reading it."""
    return knobs_read_by(SETTINGS)


def knobs_read_by(path: Path) -> dict[str, str]:
    """Every environment variable a module reads by name, with the function reading it."""
    knobs: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in ENV_FUNCTIONS:
            knobs[first.value] = func.id
        elif isinstance(func, ast.Attribute) and ast.unparse(func) in {
            "os.environ.get",
            "os.getenv",
        }:
            knobs[first.value] = "env_str"
    return knobs


def variables_read_by_services() -> set[str]:
    pattern = re.compile(r'(?:environ|env)\.get\(\s*"([A-Z][A-Z0-9_]*)"')
    return {name for path in DEVSERVICES.glob("*.py") for name in pattern.findall(path.read_text())}


@functools.cache  # parsing the project's modules takes a second; no test changes them
def variables_read_by_the_code() -> frozenset[str]:
    """What settings.py, gunicorn's configuration, `make run`'s tooling and every other
    module of the project read from the environment (`os.environ.get`, `env_*`)."""
    modules = [
        GUNICORN_CONF,
        ROOT / "manage.py",
        *(
            path
            for package in ("scheduler_project", "jobs", "worker")
            for path in (ROOT / package).rglob("*.py")
        ),
    ]
    return frozenset(
        {name for path in modules for name in knobs_read_by(path)} | variables_read_by_services()
    )


def documented_in_env_example() -> dict[str, str]:
    pattern = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$")
    documented = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if match := pattern.match(line):
            documented[match[1]] = match[2]
    return documented


def readme_configuration_rows() -> dict[str, str]:
    """`| \\`NAME\\` | \\`default\\` or (empty) | meaning |` rows of README.md."""
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        if match := re.match(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*([^|]*?)\s*\|", line):
            default = match[2]
            rows[match[1]] = "" if default == "(empty)" else default.strip("`")
    return rows


def split_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def typed(function: str, raw: str) -> Any:
    converters: dict[str, Callable[[str], Any]] = {
        "env_str": str,
        "env_database_url": str,
        "env_log_level": str.upper,
        "env_int": int,
        "env_float": float,
        "env_seconds": float,
        "env_bool": lambda value: value.strip().lower() in TRUE_WORDS,
        "env_list": split_list,
        "env_rate": str,
        "env_redis_url": str,
        "env_networks": split_list,
    }
    return converters[function](raw)


@pytest.fixture
def load_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    """Evaluate a copy of settings.py whose project root (and so `.env`) is `tmp_path`,
    in an environment holding only the variables given."""
    project = tmp_path / "scheduler_project"
    project.mkdir()
    shutil.copy(SETTINGS, project / "settings.py")

    def load(dotenv: str = "", **environment: str) -> dict[str, Any]:
        # monkeypatch restores each variable afterwards, including those .env sets: set
        # first, so that one absent before is recorded as such (delenv alone records nothing).
        for name in knobs_read_by_settings():
            monkeypatch.setenv(name, "")
            monkeypatch.delenv(name)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        (tmp_path / ".env").write_text(dotenv)
        return runpy.run_path(str(project / "settings.py"))

    return load


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_database_url_accepts_both_schemes(load_settings, scheme):
    settings = load_settings(DATABASE_URL=f"{scheme}://sched:s%40cret@db.example:6543/jobsdb")
    database = settings["DATABASES"]["default"]
    assert database["ENGINE"] == "scheduler_project.postgresql"
    assert (database["HOST"], database["PORT"], database["NAME"]) == ("db.example", 6543, "jobsdb")
    assert (database["USER"], database["PASSWORD"]) == ("sched", "s@cret")


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("postgres://postgres@%2Fvar%2Frun%2Fpostgresql/jobsdb", "/var/run/postgresql", ""),
        # The form tests/conftest.py hands to worker subprocesses.
        ("postgres://postgres@%2Ftmp%2Fmy%20data%2Fpg:5432/jobsdb", "/tmp/my data/pg", 5432),
    ],
)
def test_database_url_with_a_unix_socket_directory_as_host(load_settings, url, host, port):
    database = load_settings(DATABASE_URL=url)["DATABASES"]["default"]
    assert (database["HOST"], database["PORT"], database["NAME"]) == (host, port, "jobsdb")


def test_a_dead_link_to_the_database_ends_in_an_error_by_default(load_settings):
    """libpq waits forever by default: on a connection attempt nobody answers, and on a link
    that died without a word (a worker so blocked neither logs nor stops at SIGTERM)."""
    options = load_settings()["DATABASES"]["default"]["OPTIONS"]
    assert options["connect_timeout"] == 10
    assert (options["keepalives"], options["keepalives_idle"]) == (1, 15)
    assert (options["keepalives_interval"], options["keepalives_count"]) == (5, 3)
    assert options["tcp_user_timeout"] == 30_000


def test_database_url_parameters_win_over_the_link_defaults(load_settings):
    url = "postgres://sched@db.example/jobsdb?connect_timeout=3&keepalives=0&sslmode=require"
    options = load_settings(DATABASE_URL=url)["DATABASES"]["default"]["OPTIONS"]
    assert (options["connect_timeout"], options["keepalives"]) == (3, 0)
    assert options["sslmode"] == "require"


def test_the_embedded_postgres_url_points_django_at_its_socket(load_settings, tmp_path):
    embedded = EmbeddedPostgres(tmp_path / "data" / "postgres")
    database = load_settings(DATABASE_URL=embedded.url)["DATABASES"]["default"]
    assert database["HOST"] == str(embedded.socket_dir)
    assert database["NAME"] == "scheduler"


def test_environment_overrides_defaults(load_settings):
    settings = load_settings(
        DEBUG="false",
        SECRET_KEY="a-long-random-production-key-" + "x" * 40,
        SCHEDULER_CONCURRENCY="9",
        SCHEDULER_BACKOFF_BASE_SECONDS="2.5",
        ALLOWED_HOSTS="jobs.example, admin.example",
        REDIS_URL="unix:///run/redis.sock?db=2",
        DATABASE_TEST_NAME="test_other",
    )
    assert settings["DEBUG"] is False
    assert settings["SCHEDULER_CONCURRENCY"] == 9
    assert settings["SCHEDULER_BACKOFF_BASE_SECONDS"] == 2.5
    assert settings["ALLOWED_HOSTS"] == ["jobs.example", "admin.example"]
    assert settings["CACHES"]["default"]["LOCATION"] == "unix:///run/redis.sock?db=2"
    assert settings["DATABASES"]["default"]["TEST"]["NAME"] == "test_other"


@pytest.mark.parametrize("secret_key", [None, "", "  ", DEVELOPMENT_KEY])
def test_production_refuses_to_start_without_a_secret_key_of_its_own(load_settings, secret_key):
    environment = {"DEBUG": "false"}
    if secret_key is not None:
        environment["SECRET_KEY"] = secret_key
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY") as refused:
        load_settings(**environment)
    assert "secrets.token_urlsafe" in str(refused.value)


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        (
            {"SCHEDULER_CONCURRENCY": "four"},
            "SCHEDULER_CONCURRENCY='four': expected a whole number",
        ),
        ({"SCHEDULER_CONCURRENCY": "0"}, "SCHEDULER_CONCURRENCY='0': must be at least 1"),
        # Every thread the host had, then "can't start new thread".
        (
            {"SCHEDULER_CONCURRENCY": "100000000"},
            "SCHEDULER_CONCURRENCY='100000000': must be at most 1000",
        ),
        # Passed the start, then failed every prune pass (1e14: the dashboard too).
        (
            {"SCHEDULER_RETAIN_COMPLETED": "1e11"},
            "SCHEDULER_RETAIN_COMPLETED='1e11': must be at most 3.1536e+09",
        ),
        ({"LOGIN_LOCKOUT_MINUTES": "1e15"}, "LOGIN_LOCKOUT_MINUTES='1e15': must be at most"),
        ({"SCHEDULER_HANDLER_TIMEOUT": "-1"}, "SCHEDULER_HANDLER_TIMEOUT='-1': must be above 0"),
        ({"SCHEDULER_HEARTBEAT_INTERVAL": "nan"}, "SCHEDULER_HEARTBEAT_INTERVAL='nan': expected"),
        ({"SCHEDULER_PREFETCH": "-5"}, "SCHEDULER_PREFETCH='-5': must be at least 0"),
        ({"DEBUG": "maybe"}, "DEBUG='maybe': expected true or false"),
        ({"API_PAGE_SIZE": "80"}, "API_PAGE_SIZE=80 is over API_MAX_PAGE_SIZE=50"),
        ({"API_RATE_LIMIT": "10/fortnight"}, "API_RATE_LIMIT='10/fortnight': expected a count"),
        ({"API_TOKEN_FAILURE_LIMIT": "many"}, "API_TOKEN_FAILURE_LIMIT='many': expected a count"),
        ({"REDIS_URL": "garbage"}, "REDIS_URL='garbage': Redis URL must specify one of"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD': expected one of DEBUG, INFO, WARNING"),
        ({"DATABASE_URL": "garbage"}, "DATABASE_URL='garbage': expected a postgres:// or"),
        # Taken for PostgreSQL's, with MySQL's port and user, until the first query.
        ({"DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL='mysql://u@h/db': expected a post"),
        # The password is not repeated in the message.
        (
            {"DATABASE_URL": "sqlite://u:s3cret@h/db"},
            "DATABASE_URL='sqlite://u:***@h/db': expected a postgres:// or postgresql:// URL",
        ),
        ({"DATABASE_URL": "postgres://h:port/db"}, "DATABASE_URL='postgres://h:port/db': This"),
        (
            {"DATABASE_POOL_MIN_SIZE": "20"},
            "DATABASE_POOL_MIN_SIZE=20 is over DATABASE_POOL_MAX_SIZE=10",
        ),
        (
            {"DATABASE_POOL_MIN_SIZE": "3", "DATABASE_POOL_MAX_SIZE": "2"},
            "DATABASE_POOL_MIN_SIZE=3 is over DATABASE_POOL_MAX_SIZE=2",
        ),
        (
            # Before: accepted, and a live worker rescued its own running jobs between two
            # heartbeats: every job longer than the timeout ran twice at once.
            {"SCHEDULER_HEARTBEAT_INTERVAL": "40"},
            "SCHEDULER_WORKER_TIMEOUT=30 must be at least 3 times SCHEDULER_HEARTBEAT_INTERVAL=40",
        ),
        (
            {"SCHEDULER_HEARTBEAT_INTERVAL": "2", "SCHEDULER_WORKER_TIMEOUT": "5"},
            "SCHEDULER_WORKER_TIMEOUT=5 must be at least 3 times SCHEDULER_HEARTBEAT_INTERVAL=2",
        ),
        (
            {"OUTBOUND_ALLOWED_NETWORKS": "10.0.0.0/8, 10.0.0.0/33"},
            "OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/33' does not appear to be an IPv4 or IPv6",
        ),
    ],
)
def test_a_value_that_cannot_work_stops_the_start_naming_its_variable(
    load_settings, environment, message
):
    # Before: a bare "invalid literal for int()" from somewhere, a ValueError from the
    # worker's insides, or a timeout every job ran over at once; DEBUG=maybe meant false; a
    # rate DRF cannot read made every API request a 500, a network every http_request fail.
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        load_settings(**environment)


def manage_check(**environment: str) -> subprocess.CompletedProcess[str]:
    """`manage.py check` as a process: logging is configured, and the pool read, only there."""
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        # Before: "ValueError: Unable to configure root logger", after the settings loaded.
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD': expected one of DEBUG, INFO, WARNING"),
        # Before: dj_database_url.UnknownSchemeError.
        ({"DATABASE_URL": "garbage"}, "DATABASE_URL='garbage': expected a postgres://"),
        # Before: all three were accepted, and failed at the first query (the pool's
        # "max_size must be >= min_size", or no MySQL speaking PostgreSQL's protocol).
        ({"DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL='mysql://u@h/db': expected a post"),
        ({"DATABASE_POOL_MIN_SIZE": "20"}, "DATABASE_POOL_MIN_SIZE=20 is over DATABASE_POOL_MAX"),
    ],
)
def test_every_process_refuses_at_start_naming_the_variable(environment, message):
    checked = manage_check(**environment)
    assert checked.returncode != 0
    # One line: before, a traceback of 43 that began with "KeyError: 'check'".
    assert checked.stderr.startswith("ImproperlyConfigured: " + message), checked.stderr
    assert len(checked.stderr.strip().splitlines()) == 1, checked.stderr


def test_log_level_is_read_in_any_case(load_settings):
    # Before: "debug" stopped every process with "Unable to configure root logger".
    assert load_settings(LOG_LEVEL="debug")["LOGGING"]["root"]["level"] == "DEBUG"
    assert load_settings(LOG_LEVEL=" Warning ")["LOGGING"]["root"]["level"] == "WARNING"
    assert manage_check(LOG_LEVEL="debug").returncode == 0


# An empty value means "none" for these: lists, and a limit whose default is not empty.
EMPTY_MEANS_NONE = {"ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "API_TOKEN_FAILURE_LIMIT"}


def test_an_empty_variable_means_its_default(load_settings):
    # As `.env.example`'s `NAME=` lines read, and as `make run` reads DATABASE_URL= and
    # REDIS_URL=. Before: an empty SCHEDULER_EVENTS_CHANNEL published on the channel "", an
    # empty LOG_LEVEL or DATABASE_URL stopped the start with a traceback, an empty
    # DATABASE_TEST_NAME or EMAIL_BACKEND failed later.
    defaults = load_settings()
    emptied = load_settings(
        **{name: "" for name in knobs_read_by_settings() if name not in EMPTY_MEANS_NONE}
    )
    differences = {
        name: (value, emptied.get(name))
        for name, value in defaults.items()
        if name.isupper() and emptied.get(name) != value
    }
    assert not differences, differences
    assert emptied["SCHEDULER_EVENTS_CHANNEL"] == "scheduler:events:scheduler:0"
    assert load_settings(API_TOKEN_FAILURE_LIMIT="")["API_TOKEN_FAILURE_LIMIT"] == ""


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"WEB_CONCURRENCY": "0"}, "WEB_CONCURRENCY='0': must be at least 1"),
        ({"PORT": "70000"}, "PORT='70000': must be at most 65535"),
        ({"PORT": "http"}, "PORT='http': expected a whole number"),
    ],
)
def test_the_production_server_refuses_what_cannot_work_by_the_same_rule(
    monkeypatch, environment, message
):
    # WEB_CONCURRENCY=0 started a gunicorn that supervised no process: up, answering nothing.
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        runpy.run_path(str(GUNICORN_CONF))


def test_the_production_server_reads_dotenv_like_the_settings(tmp_path, monkeypatch):
    # deploy/'s Procfile and systemd unit run gunicorn directly: before, WEB_CONCURRENCY and
    # PORT in `.env` were ignored by it (the settings, read later, load `.env` themselves).
    (tmp_path / "deploy").mkdir()
    conf = tmp_path / "deploy" / "gunicorn.conf.py"
    shutil.copy(GUNICORN_CONF, conf)
    (tmp_path / ".env").write_text("WEB_CONCURRENCY=7\nPORT=5123\n")
    for name in ("WEB_CONCURRENCY", "PORT"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    config = runpy.run_path(str(conf))
    assert (config["workers"], config["bind"]) == (7, ["0.0.0.0:5123"])
    monkeypatch.setenv("WEB_CONCURRENCY", "2")
    assert runpy.run_path(str(conf))["workers"] == 2


def test_the_production_server_listens_where_it_is_told(monkeypatch):
    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    config = runpy.run_path(str(GUNICORN_CONF))
    assert (config["workers"], config["bind"]) == (3, ["127.0.0.1:8000"])
    monkeypatch.setenv("PORT", "5000")
    assert runpy.run_path(str(GUNICORN_CONF))["bind"] == ["0.0.0.0:5000"]


def test_deployments_sharing_a_redis_server_publish_on_channels_of_their_own(load_settings):
    # Redis pub/sub ignores the database number: with one channel name for all, a console
    # showed another deployment's counters and jobs.
    channels = {
        load_settings(DATABASE_URL=f"postgres://db/{database}", REDIS_URL=redis)[
            "SCHEDULER_EVENTS_CHANNEL"
        ]
        for database, redis in [
            ("jobs", "redis://cache:6379/0"),
            ("jobs", "redis://cache:6379/1"),
            ("staging", "redis://cache:6379/1"),
            ("staging", "unix:///run/redis.sock?db=2"),
        ]
    }
    assert channels == {
        "scheduler:events:jobs:0",
        "scheduler:events:jobs:1",
        "scheduler:events:staging:1",
        "scheduler:events:staging:2",
    }
    chosen = load_settings(SCHEDULER_EVENTS_CHANNEL="ours")["SCHEDULER_EVENTS_CHANNEL"]
    assert chosen == "ours"
    # Empty, as for every other variable: the default (before: the channel "").
    empty = load_settings(SCHEDULER_EVENTS_CHANNEL="", DATABASE_URL="postgres://db/jobs")
    assert empty["SCHEDULER_EVENTS_CHANNEL"] == "scheduler:events:jobs:0"


def test_development_may_use_the_development_key(load_settings):
    assert load_settings()["SECRET_KEY"] == DEVELOPMENT_KEY


def test_https_settings_for_a_tls_proxy(load_settings):
    settings = load_settings(
        SECURE_PROXY_SSL_HEADER_NAME="X-Forwarded-Proto",
        SECURE_HSTS_SECONDS="31536000",
        SESSION_COOKIE_SECURE="true",
        TRUSTED_PROXIES="1",
    )
    assert settings["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert settings["SECURE_HSTS_SECONDS"] == 31536000
    assert settings["SESSION_COOKIE_SECURE"] is True
    assert settings["TRUSTED_PROXIES"] == 1
    assert load_settings()["SECURE_PROXY_SSL_HEADER"] is None


def test_dotenv_is_read_and_the_real_environment_wins(load_settings):
    settings = load_settings(
        dotenv="SCHEDULER_CONCURRENCY=6\nAPI_PAGE_SIZE=30\n", API_PAGE_SIZE="40"
    )
    assert settings["SCHEDULER_CONCURRENCY"] == 6
    assert settings["API_PAGE_SIZE"] == 40


def test_every_variable_settings_reads_is_in_env_example():
    missing = set(knobs_read_by_settings()) - set(documented_in_env_example())
    assert not missing, f"add these to .env.example (with default and comment): {sorted(missing)}"


def test_every_variable_the_code_reads_is_in_env_example():
    # Before: gunicorn's WEB_CONCURRENCY and PORT were missing.
    missing = variables_read_by_the_code() - set(documented_in_env_example())
    assert not missing, f"add these to .env.example (with default and comment): {sorted(missing)}"


def test_env_example_documents_nothing_that_is_not_read():
    stale = set(documented_in_env_example()) - variables_read_by_the_code()
    assert not stale, f"nothing reads these any more: {sorted(stale)}"


def test_every_comment_of_env_example_belongs_to_a_variable():
    # Before: "Where /api-docs loads Swagger UI's files from" was left without its variable.
    variable = re.compile(r"^#?\s*[A-Z][A-Z0-9_]*=")
    text = (ROOT / ".env.example").read_text()
    _header, *blocks = text.split("\n\n")
    orphans = [
        block.strip().splitlines()[-1]
        for block in blocks
        if not variable.match(block.strip().splitlines()[-1])
    ]
    assert not orphans, f"comments with no variable under them: {orphans}"


def test_env_example_shows_the_defaults_settings_really_use(load_settings):
    knobs = knobs_read_by_settings()
    documented = documented_in_env_example()
    settings = load_settings()
    database = settings["DATABASES"]["default"]
    actual = {
        **{name: settings[name] for name in knobs if name in settings},
        **{
            f"DATABASE_POOL_{option.upper()}": value
            for option, value in database["OPTIONS"]["pool"].items()
        },
        "DATABASE_TEST_NAME": database["TEST"]["NAME"],
    }

    def matches(function: str, shown: str, real: Any) -> bool:
        # Paths are documented relative to the project root.
        return typed(function, shown) == real or str(settings["BASE_DIR"] / shown) == real

    wrong = {
        name: (documented[name], actual[name])
        for name, function in knobs.items()
        if name in actual and name in documented
        if not matches(function, documented[name], actual[name])
    }
    assert not wrong, f".env.example default vs real default: {wrong}"


def test_readme_configuration_table_matches_env_example():
    rows = readme_configuration_rows()
    documented = documented_in_env_example()
    missing = set(documented) - set(rows)
    assert not missing, f"add these to README's configuration table: {sorted(missing)}"
    different = {name: (rows[name], documented[name]) for name in documented}
    different = {name: pair for name, pair in different.items() if pair[0] != pair[1]}
    assert not different, f"README default vs .env.example default: {different}"
