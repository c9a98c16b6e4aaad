"""Django settings for Rollout Studio, read from the environment.

One machine by default: SQLite under STUDIO_DATA_DIR and an embedded Redis that the
launcher starts and exports as REDIS_URL. Team scale: set DATABASE_URL (PostgreSQL)
and REDIS_URL; no code changes.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from studio.lib.database import IDLE_IN_TRANSACTION_S, postgres_options
from studio.lib.env import envbool, envfloat, envint, envlist, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(envstr("STUDIO_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in the data dir."""
    key = envstr("SECRET_KEY")
    if key:
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "axes",
    "studio.accounts",
    "studio.datasets",
    "studio.rubrics",
    "studio.environments",
    "studio.experiments",
    "studio.runs",
    "studio.sharing",
    "studio.fleet",
    "studio.ingest",
    "studio.tracking",
    "studio.evaluations",
    "studio.serving",
    "studio.sweeps",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: it turns a lockout into its answer
]

# Content-Security-Policy (django-csp): pages run only the studio's own script files (no inline
# script or handler, no eval, nothing from another origin: plotly.js is served by the studio too)
# and talk only to the studio (its API and websockets). Styles may be inline: plotly.js sets them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:", "blob:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

ROOT_URLCONF = "studio.urls"
ASGI_APPLICATION = "studio.asgi.application"
WSGI_APPLICATION = "studio.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------
DATABASE_URL = envstr("DATABASE_URL", f"sqlite:///{DATA_DIR / 'studio.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=envint("DB_CONN_MAX_AGE", 0))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web tier and the workers write the same file: WAL lets readers go on during a
    # write, IMMEDIATE takes the write lock at BEGIN so two writers queue instead of
    # failing with "database is locked" half-way through a transaction.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A session hung inside a transaction is ended by the server (studio.lib.database). Off by default in
    # the test suite's own database: a test runs inside a transaction that may idle while it waits.
    idle_s = envfloat(
        "STUDIO_DB_IDLE_IN_TRANSACTION_S", 0.0 if envstr("STUDIO_TEST_DB_NAME") else IDLE_IN_TRANSACTION_S
    )
    if "options" not in DATABASES["default"].setdefault("OPTIONS", {}):  # DATABASE_URL's own ?options= wins
        DATABASES["default"]["OPTIONS"].update(postgres_options(idle_s))
if envstr("STUDIO_TEST_DB_NAME"):
    # A test database of its own, so two suites against one PostgreSQL server never drop each other's.
    DATABASES["default"]["TEST"] = {"NAME": envstr("STUDIO_TEST_DB_NAME")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- broker, channel layer, Celery ------------------------------------------------
REDIS_URL = envstr("REDIS_URL")  # None: in-process channel layer, tasks are not delivered
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # socket_timeout above channels_redis' 5 s blocking receive: redis-py 8 defaults it to 5 s,
            # so an idle consumer's BZPOPMIN raced the timeout and the websocket closed with 1011.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1500, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# An open run page's websocket joins its channel-layer groups again this often and reads from the
# database what it missed: memberships lost with Redis's data must not leave a page deaf
# (studio.runs.live.consumers).
LIVE_REJOIN_S = envfloat("STUDIO_LIVE_REJOIN_S", 30.0)

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
# Training tasks are acknowledged when they start: a run whose worker dies is marked
# failed by the heartbeat sweeper instead of being redelivered and restarted half-way.
CELERY_TASK_ACKS_LATE = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker takes a message only when one of its processes is free. Otherwise (the message being acked when its
# task starts) a worker whose every process runs a run reserves the next one too: it waits there behind a
# run of hours while another worker is idle, and a worker whose process hung (SIGSTOP) holds the restart of
# the run it lost for as long as it hangs (bench/fault_hung_worker.py). Redis brokers only (Celery 5.6+).
CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_TASK_ROUTES = {
    "workers.run_training": {"queue": "gpu"},
    "workers.run_eval": {"queue": "gpu"},
    # A suite's job evaluates like an evaluation run, on the same queue and places.
    "workers.run_suite": {"queue": "gpu"},
    "workers.score_rubric": {"queue": "default"},
    "workers.check_dataset": {"queue": "default"},
    "workers.try_environment": {"queue": "default"},
    # A model server holds its pool process while it serves, on the queue whose places runs wait for.
    "workers.serve_model": {"queue": "gpu"},
    "workers.export_checkpoint": {"queue": "default"},  # on the CPU (workers.serving.export)
}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- runs -------------------------------------------------------------------------
HEARTBEAT_INTERVAL_S = envfloat("STUDIO_HEARTBEAT_INTERVAL_S", 10.0)
HEARTBEAT_TIMEOUT_S = envfloat("STUDIO_HEARTBEAT_TIMEOUT_S", 45.0)
# A run whose GPUs are not all free goes back to the queue and is tried again after this long
# (studio.fleet.leases); its pool process serves other runs meanwhile.
GPU_WAIT_RETRY_S = envfloat("STUDIO_GPU_WAIT_RETRY_S", 10.0)
# A worker that shares its GPUs: this many one-process runs on each GPU, each told its part of the memory
# (studio.fleet.leases, docs/gpu-workers.md). 1: a GPU serves one run.
GPU_SHARE = envint("STUDIO_GPU_SHARE", 1)
if not 1 <= GPU_SHARE <= 64:
    raise ImproperlyConfigured(f"STUDIO_GPU_SHARE must be from 1 to 64 (runs per GPU), got {GPU_SHARE}")
# A cancelled multi-process run stops at its next step; processes still there after this long are killed.
RUN_STOP_GRACE_S = envfloat("STUDIO_RUN_STOP_GRACE_S", 120.0)
# What a device-hour costs, for the cost the run pages, the usage page and the API show (studio.runs.usage),
# in PRICE_CURRENCY; 0 (unset): not priced, and the pages show device-hours and tokens alone.
GPU_HOUR_PRICE = envfloat("STUDIO_GPU_HOUR_PRICE", 0.0)
CPU_HOUR_PRICE = envfloat("STUDIO_CPU_HOUR_PRICE", 0.0)
PRICE_CURRENCY = envstr("STUDIO_PRICE_CURRENCY", "USD")
if GPU_HOUR_PRICE < 0 or CPU_HOUR_PRICE < 0:
    raise ImproperlyConfigured("STUDIO_GPU_HOUR_PRICE and STUDIO_CPU_HOUR_PRICE must be 0 (not priced) or more")
# The Ray cluster that runs spanning several machines (parallel.nodes > 1) use: its head's "host:6379"
# (the worker's machine has joined it) or a Ray Client "ray://head:10001"; RAY_ADDRESS, Ray's own
# variable, works too. Unset: such runs are refused at launch (studio.runs.placement; docs/gpu-workers.md).
RAY_ADDRESS = envstr("STUDIO_RAY_ADDRESS") or envstr("RAY_ADDRESS")
# --- model serving (studio.serving, workers.serving) ------------------------------------
SERVING_ENGINE = envstr("STUDIO_SERVING_ENGINE", "auto")  # auto (vLLM where installed), vllm, transformers
SERVING_HOST = envstr("STUDIO_SERVING_HOST", "127.0.0.1")  # where a worker's model server listens
SERVING_IDLE_S = envfloat("STUDIO_SERVING_IDLE_S", 600.0)  # a model server unused this long is stopped
SERVING_START_TIMEOUT_S = envfloat("STUDIO_SERVING_START_TIMEOUT_S", 300.0)  # a request waits this long for one
SERVING_LOAD_TIMEOUT_S = envfloat("STUDIO_SERVING_LOAD_TIMEOUT_S", 600.0)  # the worker waits this long for it
SERVING_REQUEST_TIMEOUT_S = envfloat("STUDIO_SERVING_REQUEST_TIMEOUT_S", 300.0)
SERVING_MAX_TOKENS = envint("STUDIO_SERVING_MAX_TOKENS", 4096)
SERVING_MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # what the studio relays from a model server, at most
SERVING_EXPORT_TIMEOUT_S = envfloat("STUDIO_SERVING_EXPORT_TIMEOUT_S", 600.0)  # the export page waits this long
RUBRIC_TRY_TIMEOUT_S = envfloat("STUDIO_RUBRIC_TRY_TIMEOUT_S", 60.0)
# Loading a model and running a few episodes takes longer than scoring pairs.
ENVIRONMENT_TRY_TIMEOUT_S = envfloat("STUDIO_ENVIRONMENT_TRY_TIMEOUT_S", 180.0)
# --- datasets -------------------------------------------------------------------------
# Uploads larger than this are refused before a byte is kept (studio.datasets.uploads).
MAX_UPLOAD_MB = envint("STUDIO_MAX_UPLOAD_MB", 2048)
if MAX_UPLOAD_MB < 1:
    raise ImproperlyConfigured(f"STUDIO_MAX_UPLOAD_MB must be at least 1, got {MAX_UPLOAD_MB}")
# A run's worker copies the data it trains on into the run's folder (workers.provenance), so "Run again
# exactly" reads the same bytes; data larger than this is only hashed (a re-run then warns if it changed).
SNAPSHOT_MAX_MB = envint("STUDIO_SNAPSHOT_MAX_MB", 2048)
# The dataset check warns about prompts longer than this (32,000 characters is about 8k tokens).
LONG_PROMPT_CHARS = envint("STUDIO_LONG_PROMPT_CHARS", 32_000)
# Server-side files may be registered as datasets only from under these folders.
DATASET_ROOTS = [Path(p).resolve() for p in envlist("STUDIO_DATASET_ROOTS", [str(DATA_DIR), str(BASE_DIR)])]
# Where a run may send the policy's weights and prompts (rollout.vllm_server_url) or completions
# (an LLM judge's base_url): hosts, host:port or scheme://host:port, "*" for any. By default this
# machine's own loopback only (a vLLM server or judge started beside the worker), so nothing leaves it.
ALLOWED_ENDPOINTS = envlist("STUDIO_ALLOWED_ENDPOINTS", ["localhost", "127.0.0.1", "[::1]"])
# Experiment trackers a run may mirror its metrics, settings and rollouts (prompts, completions) to
# (studio.tracking): W&B's cloud and this machine's loopback by default; add a team's own W&B, MLflow
# or Trackio server here ("*" for any).
TRACKER_ENDPOINTS = envlist("STUDIO_TRACKER_ENDPOINTS", ["https://api.wandb.ai", "localhost", "127.0.0.1", "[::1]"])

# --- auth, API ----------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"}]
# Sign-in (the page and POST /api/token/) is locked for a username from one address after this many
# failures in a row, until the cool-off has passed (django-axes; studio.accounts.lockout). A success
# resets the count. `manage.py axes_reset_username <name>` lifts a lockout at once.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = envbool("STUDIO_LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = envint("STUDIO_LOGIN_FAILURE_LIMIT", 10)
if AXES_FAILURE_LIMIT < 1:
    raise ImproperlyConfigured(f"STUDIO_LOGIN_FAILURE_LIMIT must be at least 1, got {AXES_FAILURE_LIMIT}")
AXES_COOLOFF_TIME = timedelta(minutes=envfloat("STUDIO_LOGIN_COOLOFF_MINUTES", 15.0))
if timedelta(0) >= AXES_COOLOFF_TIME:
    raise ImproperlyConfigured("STUDIO_LOGIN_COOLOFF_MINUTES must be more than 0")
# Per username and address: a guesser elsewhere cannot lock a user out of their own machine.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "studio.accounts.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "studio.accounts.lockout.client_address"  # behind a proxy: the address it saw
AXES_DISABLE_ACCESS_LOG = True  # counts failures only: no row written per successful sign-in
AXES_VERBOSE = False

# --- HTTPS ------------------------------------------------------------------------
# Behind TLS (at team scale, usually a reverse proxy that terminates it), STUDIO_HTTPS=1 marks cookies
# Secure, sends HSTS and trusts the proxy's X-Forwarded-Proto. Off by default: a single-machine studio
# is reached over plain http://localhost. Plain HTTP is redirected only with STUDIO_SSL_REDIRECT=1 (the
# proxy usually does it, and the launcher's own checks call http://127.0.0.1).
HTTPS = envbool("STUDIO_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = envbool("STUDIO_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = envint("STUDIO_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("STUDIO_HSTS_INCLUDE_SUBDOMAINS", False)
# Behind one reverse proxy: its X-Forwarded-Proto says HTTPS, and the address it appended last to
# X-Forwarded-For is the client's (for the sign-in lockout). Without one both headers are the client's
# own words and are ignored.
BEHIND_PROXY = envbool("STUDIO_BEHIND_PROXY", HTTPS)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True  # Django's default, said here: static files get it too (studio.lib.static)

# Every JSON body is read within these limits (studio.lib.json_limits): larger, deeper, or holding
# NaN / Infinity / 1e999, it is refused with a 400 that names the limit, before a view sees it.
JSON_MAX_MB = envint("STUDIO_JSON_MAX_MB", 10)
JSON_MAX_BYTES = JSON_MAX_MB * 1024 * 1024
JSON_MAX_DEPTH = envint("STUDIO_JSON_MAX_DEPTH", 64)
if JSON_MAX_MB < 1 or JSON_MAX_DEPTH < 8:
    raise ImproperlyConfigured("STUDIO_JSON_MAX_MB must be at least 1 and STUDIO_JSON_MAX_DEPTH at least 8")

REST_FRAMEWORK = {
    "DEFAULT_PARSER_CLASSES": [
        "studio.lib.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "studio.lib.api_schema.StudioAutoSchema",  # adds each operation's 400/403/404
    "DEFAULT_PAGINATION_CLASS": "studio.lib.pagination.LimitOffsetPagination",  # ?limit= capped at 1000
    "EXCEPTION_HANDLER": "studio.lib.errors.exception_handler",  # a service's Refused: its status and body
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Rollout Studio API",
    "DESCRIPTION": "Datasets, rubrics, experiments and RL post-training runs. Token auth: `Authorization: Token <key>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,  # request bodies of their own: an upload is a binary file, not a URI
    "ENUM_NAME_OVERRIDES": {
        "RunKindEnum": "studio.runs.models.KINDS",
        "RunStateEnum": "studio.runs.models.STATES",
        "RunSourceEnum": "studio.runs.models.SOURCES",
        "IngestSourceEnum": "studio.ingest.items.EXTERNAL_SOURCES",
    },
}

# --- files ---------------------------------------------------------------------------
# Uploads above 1 MiB go to a temporary file as they arrive, never whole into memory; the first
# handler stops keeping a file's bytes past MAX_UPLOAD_MB.
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "studio.datasets.uploads.SizeLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_MEMORY_SIZE = JSON_MAX_BYTES  # a body that is not a file: a form, or JSON read by a page
FILE_UPLOAD_TEMP_DIR = str(DATA_DIR / "tmp")
Path(FILE_UPLOAD_TEMP_DIR).mkdir(parents=True, exist_ok=True)

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STATIC_ROOT = DATA_DIR / "static"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # django-axes logs every sign-in at INFO; its lockouts are warnings.
    "loggers": {"django.channels.server": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
