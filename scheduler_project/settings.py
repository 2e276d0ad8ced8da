"""Every setting of the project, read from the environment in this one place.

Each knob has a default that works for local development; README.md lists them all.
A `.env` file next to manage.py is read first when present (real environment wins).
"""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

from jobs.command_options import MOST_HANDLER_SLOTS
from jobs.limits import MAX_ATTEMPTS
from scheduler_project.environment import (
    LONGEST_SECONDS,
    env_bool,
    env_database_url,
    env_float,
    env_int,
    env_list,
    env_log_level,
    env_networks,
    env_rate,
    env_redis_url,
    env_seconds,
    env_str,
    importable_apps,
    redis_database,
)

BASE_DIR = Path(__file__).resolve().parent.parent
load_dotenv(BASE_DIR / ".env", override=False)


DEBUG = env_bool("DEBUG", True)
# Public, so only ever accepted with DEBUG on.
DEVELOPMENT_SECRET_KEY = "dev-insecure-secret-key-change-me-in-production-0123456789"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
if not DEBUG and SECRET_KEY.strip() in ("", DEVELOPMENT_SECRET_KEY):
    # Anyone who knows the key can forge sessions, so a public or empty one must never sign
    # them outside development.
    raise ImproperlyConfigured(
        "DEBUG is false but SECRET_KEY is unset, empty or the public development key. "
        "Set SECRET_KEY to a long random value, e.g. the output of: "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list(
    "CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000"
)

# HTTPS. All off for `make run` on plain HTTP; README's production settings turn them on.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# Behind a TLS-terminating proxy: the header it sets to "https" on HTTPS requests.
_proxy_ssl_header = env_str("SECURE_PROXY_SSL_HEADER_NAME", "")
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)
# Load balancers probe these over plain HTTP: a redirect to HTTPS would fail their check.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# How many proxies of yours stand in front of the app. Each appends the address it got the
# request from to X-Forwarded-For, so the client is the one the outermost of them saw; any
# earlier entry was written by the client itself. 0: X-Forwarded-For is ignored.
TRUSTED_PROXIES = env_int("TRUSTED_PROXIES", 0, minimum=0)

DATABASE_URL = env_database_url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/scheduler")
REDIS_URL = env_redis_url("REDIS_URL", "redis://127.0.0.1:6379/0")

INSTALLED_APPS = [
    # daphne's `runserver` (ASGI), first so that it wins over staticfiles'.
    "scheduler_project.daphne_app.DaphneConfig",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "csp",
    # Before channels: our `runworker` (the job worker) must win over channels' own.
    "worker",
    "channels",
    "jobs",
    # More apps, e.g. ones whose handlers.py adds job types (the tests' handlers_app).
    *importable_apps("SCHEDULER_EXTRA_APPS", env_list("SCHEDULER_EXTRA_APPS", "")),
]

MIDDLEWARE = [
    "jobs.api.middleware.RequestIdMiddleware",
    "jobs.api.middleware.NulParameterMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files, before anything that reads a session or a database: WhiteNoise answers
    # them from memory-mapped files with cache headers (compressed, hashed names in production).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # django-csp's, on everything but JSON answers.
    "jobs.api.middleware.DocumentPolicyMiddleware",
    # After Django's own, as django-axes asks: it turns a locked-out login into its page.
    "axes.middleware.AxesMiddleware",
    "jobs.api.middleware.AuditActorMiddleware",
    # Last: it turns a database outage raised by a view into a 503 (see its module).
    "jobs.api.unavailable.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "scheduler_project.urls"
ASGI_APPLICATION = "scheduler_project.asgi.application"
WSGI_APPLICATION = "scheduler_project.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # The console is a package of the `jobs` app, not an app: name its tag library.
            "libraries": {"console": "jobs.console.templatetags.console"},
        },
    },
]

# Each process borrows its connections from a psycopg pool, for one request or one short read
# at a time (Django requires CONN_MAX_AGE 0 with a pool). A web process so holds between
# MIN_SIZE and MAX_SIZE connections whatever its number of clients; a request that finds
# them all busy waits up to TIMEOUT seconds. The worker opts out (see runworker). The backend
# is Django's, with a pool health check that costs no round trip (scheduler_project.postgresql).
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        engine="scheduler_project.postgresql",
        conn_max_age=0,
        conn_health_checks=True,
    )
}
_pool_min_size = env_int("DATABASE_POOL_MIN_SIZE", 1, minimum=0)
_pool_max_size = env_int("DATABASE_POOL_MAX_SIZE", 10, minimum=1)
if _pool_min_size > _pool_max_size:
    # psycopg_pool would refuse it only when the first request opens the pool.
    raise ImproperlyConfigured(
        f"DATABASE_POOL_MIN_SIZE={_pool_min_size} is over DATABASE_POOL_MAX_SIZE={_pool_max_size}."
    )
DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
    "min_size": _pool_min_size,
    "max_size": _pool_max_size,
    "timeout": env_seconds("DATABASE_POOL_TIMEOUT", 10.0, above=0),
}
# Django turns psycopg's automatic preparation off; the hot statements `jobs.sql.fetch` runs
# `prepared` (creating, claiming, completing jobs) are prepared once run 5 times on a
# connection (the ORM binds its parameters on the client and is never prepared). Off for a
# pooler in transaction mode without prepared statements (PgBouncer before 1.21).
DATABASES["default"]["OPTIONS"]["prepare_threshold"] = (
    5 if env_bool("DATABASE_PREPARED_STATEMENTS", True) else None
)
# A link to PostgreSQL that dies without a word (a host gone, a firewall or NAT dropping the
# connection) must end in an error, not a wait without end: libpq's defaults never give up,
# and a worker blocked on such a connection neither logs nor stops at SIGTERM. So a
# connection attempt gives up after 10 s, a silent idle connection is found dead after
# 15 s + 3 x 5 s of keepalive probes, and one whose sent data goes unacknowledged after 30 s.
# The same parameters in DATABASE_URL's query win (`?connect_timeout=3`); libpq ignores the
# TCP ones on a Unix socket.
DATABASES["default"]["OPTIONS"] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 15,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
    **DATABASES["default"]["OPTIONS"],
}
DATABASES["default"].setdefault("TEST", {})["NAME"] = env_str(
    "DATABASE_TEST_NAME", f"test_{DATABASES['default']['NAME']}"
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        # Rate-limit counters live here: deployments (or test runs) sharing a Redis need
        # prefixes of their own.
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", ""),
        "OPTIONS": {
            "SOCKET_CONNECT_TIMEOUT": 1,
            "SOCKET_TIMEOUT": 1,
            "IGNORE_EXCEPTIONS": True,
        },
    }
}

# Login lockout (django-axes): after LOGIN_FAILURE_LIMIT failed logins for one user name from
# one client address, that pair is refused for LOGIN_LOCKOUT_MINUTES, whatever the password.
# Attempts and lockouts are listed in the admin ("Axes"); a success resets the count.
AUTHENTICATION_BACKENDS = [
    "jobs.console.lockout.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(
    minutes=env_float("LOGIN_LOCKOUT_MINUTES", 15.0, minimum=0, maximum=LONGEST_SECONDS / 60)
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "jobs.api.clients.client_address"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
# The console's answer when a form outlived its CSRF token (Django's own page elsewhere).
CSRF_FAILURE_VIEW = "jobs.console.access.csrf_failure"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Content Security Policy (django-csp) on every page: scripts, styles, images and
# connections from this site only. The console has no inline script, style or event handler
# (htmx's own indicator style is off in its config: no page uses indicators), so nothing
# needs 'unsafe-inline'. Swagger UI's page is the one exception: it is an inline script.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/api-docs"],
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"
# Outside development, `collectstatic` writes compressed copies with content-hashed names that
# WhiteNoise serves with a year's cache. In development WhiteNoise serves straight from the
# finders (static/ and the apps' static folders), so nothing needs collecting.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
# A page that names a file the manifest lacks still renders (with the plain name).
WHITENOISE_MANIFEST_STRICT = False
# Fixed here, from the environment's DEBUG, rather than read from settings.DEBUG when the
# middleware starts (test runners switch that off at run time).
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
# Where django.core.mail.backends.filebased.EmailBackend writes (`make run` uses it).
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(BASE_DIR / ".data" / "emails"))
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "scheduler@localhost")

# The HTTP API.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1024 * 1024, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES
API_RATE_LIMIT = env_rate("API_RATE_LIMIT", "")
# Failed token attempts a client address may make, e.g. 10/min; over it every request from
# that address is a 429 until the period is over, even with a good token. Empty: no limit.
API_TOKEN_FAILURE_LIMIT = env_rate("API_TOKEN_FAILURE_LIMIT", "10/min")
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 20, minimum=1)
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 50, minimum=1)
if API_PAGE_SIZE > API_MAX_PAGE_SIZE:
    # Every list asked for without `limit` would be refused.
    raise ImproperlyConfigured(
        f"API_PAGE_SIZE={API_PAGE_SIZE} is over API_MAX_PAGE_SIZE={API_MAX_PAGE_SIZE}."
    )

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["jobs.api.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["jobs.api.permissions.RolePermission"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "jobs.api.negotiation.ContentNegotiation",
    "EXCEPTION_HANDLER": "jobs.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["jobs.api.throttling.ConfiguredRateThrottle"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Job Scheduler API",
    "DESCRIPTION": "Submit, inspect and steer background jobs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs are public: no credentials are read, so a bad Authorization header is ignored.
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    # Several components have a `status` field with different choices (jobs, attempts, graph
    # nodes): each set is named, so none gets a hashed name.
    "ENUM_NAME_OVERRIDES": {"JobStatusEnum": "jobs.models.JobStatus"},
    # 3.1 schemas are JSON Schema 2020-12, the dialect of the handlers' payload schemas, which
    # the body of POST /jobs embeds as they are.
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "jobs.api.schema.job_create_body",
        "jobs.api.schema.bodies_required",
        "jobs.api.schema.live_routes",
        # After every hook that adds a path, so that its answers name their headers too.
        "jobs.api.schema.response_headers",
    ],
    # Swagger UI's files are served from our own static files: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True},
}

# The job engine.
# Redis pub/sub ignores the database number: deployments sharing a Redis server would hear
# each other's events on one channel name, so the default names both databases.
SCHEDULER_EVENTS_CHANNEL = env_str(
    "SCHEDULER_EVENTS_CHANNEL",
    f"scheduler:events:{DATABASES['default']['NAME']}:{redis_database(REDIS_URL)}",
)
# A default over what the jobs table's check constraint allows made every job created
# without max_retries fail.
SCHEDULER_DEFAULT_MAX_RETRIES = env_int(
    "SCHEDULER_DEFAULT_MAX_RETRIES", 3, minimum=1, maximum=MAX_ATTEMPTS
)
SCHEDULER_BACKOFF_BASE_SECONDS = env_seconds("SCHEDULER_BACKOFF_BASE_SECONDS", 5.0, minimum=0)
SCHEDULER_CONCURRENCY = env_int("SCHEDULER_CONCURRENCY", 4, minimum=1, maximum=MOST_HANDLER_SLOTS)
# Claimed jobs a worker may hold beyond its busy threads, waiting for the next free one (half
# of them per claim), and about how long the last of them may expect to wait (at its job
# type's recent pace).
SCHEDULER_PREFETCH = env_int("SCHEDULER_PREFETCH", 200, minimum=0)
SCHEDULER_PREFETCH_WAIT = env_seconds("SCHEDULER_PREFETCH_WAIT", 0.05, minimum=0)
SCHEDULER_CLAIM_BATCH = env_int("SCHEDULER_CLAIM_BATCH", 250, minimum=1)
SCHEDULER_FEEDER_INTERVAL = env_seconds("SCHEDULER_FEEDER_INTERVAL", 30.0, above=0)
# At most this many runnable jobs are held in one worker's in-memory scheduler at a time.
SCHEDULER_FEEDER_LIMIT = env_int("SCHEDULER_FEEDER_LIMIT", 50_000, minimum=1)
SCHEDULER_HEARTBEAT_INTERVAL = env_seconds("SCHEDULER_HEARTBEAT_INTERVAL", 5.0, above=0)
SCHEDULER_WORKER_TIMEOUT = env_seconds("SCHEDULER_WORKER_TIMEOUT", 30.0, above=0)
if SCHEDULER_WORKER_TIMEOUT < 3 * SCHEDULER_HEARTBEAT_INTERVAL:
    # Otherwise a live worker is declared lost between two of its heartbeats (or when one is
    # late behind a slow statement), and the jobs it is running are taken back and run twice.
    raise ImproperlyConfigured(
        f"SCHEDULER_WORKER_TIMEOUT={SCHEDULER_WORKER_TIMEOUT:g} must be at least 3 times "
        f"SCHEDULER_HEARTBEAT_INTERVAL={SCHEDULER_HEARTBEAT_INTERVAL:g}: a live worker would be "
        "declared lost between its heartbeats and its running jobs run a second time."
    )
SCHEDULER_STUCK_AFTER = env_seconds("SCHEDULER_STUCK_AFTER", 600.0, above=0)
SCHEDULER_SHUTDOWN_GRACE = env_seconds("SCHEDULER_SHUTDOWN_GRACE", 30.0, minimum=0)
SCHEDULER_HANDLER_TIMEOUT = env_seconds("SCHEDULER_HANDLER_TIMEOUT", 300.0, above=0)
# Largest result a handler may return, in bytes of compact JSON: a larger one fails its
# attempt. The default is API_MAX_BODY_BYTES's for a payload.
SCHEDULER_MAX_RESULT_BYTES = env_int("SCHEDULER_MAX_RESULT_BYTES", 1024 * 1024, minimum=1)
SCHEDULER_STATS_INTERVAL = env_seconds("SCHEDULER_STATS_INTERVAL", 0.5, above=0)
# Retention (jobs.retention): seconds a finished job is kept before the pruner deletes it
# with its attempts and logs; 0 keeps it forever. Dead letters are kept by default.
SCHEDULER_RETAIN_COMPLETED = env_seconds("SCHEDULER_RETAIN_COMPLETED", 7 * 24 * 3600.0, minimum=0)
SCHEDULER_RETAIN_DLQ = env_seconds("SCHEDULER_RETAIN_DLQ", 0.0, minimum=0)
# Seconds an audit log entry, or a login's record (django-axes' access log), is kept, then
# pruned (90 days); 0 keeps it forever.
SCHEDULER_RETAIN_AUDIT = env_seconds("SCHEDULER_RETAIN_AUDIT", 90 * 24 * 3600.0, minimum=0)
SCHEDULER_PRUNE_INTERVAL = env_seconds("SCHEDULER_PRUNE_INTERVAL", 60.0, above=0)
SCHEDULER_PRUNE_BATCH = env_int("SCHEDULER_PRUNE_BATCH", 1000, minimum=1)
# Seconds an `Idempotency-Key` keeps returning the job it first created.
SCHEDULER_IDEMPOTENCY_WINDOW = env_seconds("SCHEDULER_IDEMPOTENCY_WINDOW", 24 * 3600.0, minimum=0)
# Django Tasks (django-tasks, the backport of Django 6.0's django.tasks): every `@task`
# function's enqueue() becomes a job that `runworker` runs (jobs/tasks_backend.py).
TASKS = {"default": {"BACKEND": "jobs.tasks_backend.SchedulerBackend"}}

# The console.
CONSOLE_STALE_WORKER_SECONDS = env_seconds(
    "CONSOLE_STALE_WORKER_SECONDS", SCHEDULER_WORKER_TIMEOUT, above=0
)
SSE_KEEPALIVE_SECONDS = env_seconds("SSE_KEEPALIVE_SECONDS", 15.0, above=0)
# Frames a stream client may fall behind before it is dropped (it reconnects fresh).
SSE_CLIENT_QUEUE_SIZE = env_int("SSE_CLIENT_QUEUE_SIZE", 1000, minimum=1)
# How long a process trusts its cached list of active webhooks (zero queries per event).
WEBHOOK_CACHE_SECONDS = env_seconds("WEBHOOK_CACHE_SECONDS", 5.0, minimum=0)
WEBHOOK_TIMEOUT_SECONDS = env_seconds("WEBHOOK_TIMEOUT_SECONDS", 10.0, above=0)
# The attempts of an event's delivery: with the backoff's 5^(n-1) s, the ninth comes about a
# day after the first, so a receiver down for a deploy or a night still gets its events (as
# Svix and Stripe keep trying for a day or days). A test delivery keeps the default.
WEBHOOK_MAX_RETRIES = env_int("WEBHOOK_MAX_RETRIES", 9, minimum=1, maximum=MAX_ATTEMPTS)
# Networks (CIDR) that http_request jobs and webhooks may reach although they are loopback,
# private or link-local (refused otherwise: jobs/outbound.py), e.g. 10.20.0.0/16.
OUTBOUND_ALLOWED_NETWORKS = env_networks("OUTBOUND_ALLOWED_NETWORKS")

LOG_LEVEL = env_log_level("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "jobs.logging.RequestIdFilter"}},
    "formatters": {"json": {"()": "jobs.logging.JsonFormatter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "WARNING"},
        # django-axes logs its version at INFO in every process, every command included.
        "axes": {"level": "WARNING"},
    },
}
