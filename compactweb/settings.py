"""Settings for compactweb: one module, configured from the environment.

With nothing set, the embedded default: a SQLite file under var/, the in-memory channel layer and Celery tasks run
eagerly in-process. DATABASE_URL, REDIS_URL and CELERY_BROKER_URL switch to PostgreSQL, the Redis channel layer and a
real broker (the scale-out).
"""

import os
import sys
from pathlib import Path

import dj_database_url

from compactweb.var_dir import secure_dir, secure_file

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("COMPACTWEB_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("DJANGO_SECRET_KEY")
    if key:
        return key
    # The embedded default keeps a generated key in var/ so sessions survive restarts without a key in the repo.
    path = VAR_DIR / "secret_key"
    if path.exists():
        return secure_file(path).read_text().strip()
    from django.utils.crypto import get_random_string

    secure_dir(VAR_DIR)
    key = get_random_string(64)
    secure_file(path).write_text(key)
    return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

# Daphne's app does one thing: it makes `manage.py runserver` serve with Daphne (ASGI, websockets). Importing it
# loads Twisted and Daphne's server, about a quarter of a Celery worker's or the scheduler's start (2.86 s -> 2.21 s
# for `django.setup()` and the Celery app, idle; issue 42's cold start runs five of them at once), and nothing but
# runserver needs it: the web processes are `daphne`, which imports its server itself.
RUNSERVER = sys.argv[1:2] == ["runserver"]

INSTALLED_APPS = [
    *(["daphne"] if RUNSERVER else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "axes",
    "csp",
    "sessions_app",
    "compaction_app",
    "gateway_app",
]

MIDDLEWARE = [
    "compactweb.body_limit.BodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]
AUTHENTICATION_BACKENDS = [
    "compactweb.login_limits.LoginRateLimitBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# Single sign-on with OpenID Connect (issue 45, docs/security.md "Single sign-on"; mozilla-django-oidc): on when the
# client id and the provider's authorization endpoint are set. The client secret comes from the environment only.
# The role follows the groups claim at every sign-in: COMPACTWEB_OIDC_ROLE_GROUPS maps role=provider-group.
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.environ.get("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_USE_PKCE = True
LOGIN_REDIRECT_URL_FAILURE = "/login/"
COMPACTWEB_OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID and OIDC_OP_AUTHORIZATION_ENDPOINT)
COMPACTWEB_OIDC_USERNAME_CLAIM = os.environ.get("COMPACTWEB_OIDC_USERNAME_CLAIM", "preferred_username")
COMPACTWEB_OIDC_GROUPS_CLAIM = os.environ.get("COMPACTWEB_OIDC_GROUPS_CLAIM", "groups")
COMPACTWEB_OIDC_ROLE_GROUPS = os.environ.get("COMPACTWEB_OIDC_ROLE_GROUPS", "")
if COMPACTWEB_OIDC_ENABLED:
    # After the login rate limit, before local passwords (the break-glass admin keeps ModelBackend).
    AUTHENTICATION_BACKENDS.insert(1, "compactweb.oidc.RoleMappingBackend")

ROOT_URLCONF = "compactweb.urls"
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
                "compactweb.context_processors.role",
            ],
        },
    }
]
WSGI_APPLICATION = None
ASGI_APPLICATION = "compactweb.asgi.application"

DATABASE_URL = os.environ.get("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
else:
    # var/ 0700 and the database 0600 (issue 14): the file holds sessions, hashed tokens and every transcript.
    secure_dir(VAR_DIR)
    SQLITE_PATH = Path(os.environ.get("SQLITE_PATH", str(VAR_DIR / "compactweb.sqlite3")))
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)  # only var/ itself is chmod-ed, never a shared parent
    secure_file(SQLITE_PATH)
    DATABASES = {
        "default": {
            "ENGINE": "compactweb.db_backends.sqlite3",  # Django's, with placeholders rewritten once per statement
            "NAME": str(SQLITE_PATH),
            # WAL and a busy timeout let the dashboard read while the simulator writes. A 16 MB page cache per
            # connection (SQLite's default is 2 MB) keeps a long session's index pages in memory: with 2 MB a turn
            # of a 100k-item session cost 1.2x one of a 1k-item session (bench/bench_turn_floor.py), with 16 MB 1.0x.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16000;",
            },
            "TEST": {"NAME": str(VAR_DIR / "test.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL")
CHANNEL_GROUP_EXPIRY = int(os.environ.get("CHANNEL_GROUP_EXPIRY", "120"))
CHANNEL_CAPACITY = int(os.environ.get("CHANNEL_CAPACITY", "200"))
CHANNEL_MESSAGE_EXPIRY = int(os.environ.get("CHANNEL_MESSAGE_EXPIRY", "30"))
if REDIS_URL:
    from redis.exceptions import ConnectionError as RedisConnectionError

    # A read timeout longer than channels_redis's blocking receive (BZPOPMIN, 5 s): redis-py 8 defaults it to 5 s,
    # which aborts that wait and crashes every websocket consumer left idle a few seconds (channels_redis #422).
    # One retry on a fresh connection after a connection error: after a Redis restart the pool still holds sockets
    # to the old server, and without it the first command on each fails ("Connection closed by server"), dropping
    # pages that had just reconnected. While Redis is down the retry fails too, so consumers still close.
    # Group membership expires after CHANNEL_GROUP_EXPIRY seconds unless refreshed: live consumers re-join every
    # third of it (sessions_app.live.consumers), so the channels of a web process that died (no disconnect ran) leave
    # every group within that time instead of channels_redis's default day. A channel holds at most
    # CHANNEL_CAPACITY messages (a page far behind re-syncs over HTTP), and a message waits at most
    # CHANNEL_MESSAGE_EXPIRY seconds.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{
                    "address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5,
                    "retry_on_error": [RedisConnectionError],
                }],
                "group_expiry": CHANNEL_GROUP_EXPIRY,
                "capacity": CHANNEL_CAPACITY,
                "expiry": CHANNEL_MESSAGE_EXPIRY,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# A session's lease (one writer at a time): a dead holder blocks its session for at most this long; a live holder
# renews it every third of it (sessions_app.rollout.lease).
COMPACTWEB_LEASE_TTL_SECONDS = float(os.environ.get("COMPACTWEB_LEASE_TTL_SECONDS", "30"))
# A gateway key's route, user and role are remembered this long per process (gateway_app/proxy.py): the bound on
# a revocation reaching every process (docs/gateway.md).
COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS = float(os.environ.get("COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS", "1"))
# A gateway exchange noted as begun by a process on another host is taken for cut once this old (gateway_app/
# journal.py): the host cannot see that process's pid, so only the age tells (docs/gateway.md, "No exchange lost").
COMPACTWEB_GATEWAY_CUT_AFTER_SECONDS = float(os.environ.get("COMPACTWEB_GATEWAY_CUT_AFTER_SECONDS", "3600"))

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or None
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Session affinity (issue 34; compactweb.worker_affinity): each worker consumes a queue of its own and announces
# itself in the broker's Redis; a session's simulator steps go to the live worker rendezvous hashing picks, which
# keeps that session's caches warm. 0 sends every step to the shared queue, as before (the benchmark's "off").
COMPACTWEB_STEP_AFFINITY = os.environ.get("COMPACTWEB_STEP_AFFINITY", "1") != "0"
CELERY_WORKER_DIRECT = COMPACTWEB_STEP_AFFINITY
# Celery's Django fixup closes a worker's database connections around every task unless this is set; a worker then
# reopens one per task (a PostgreSQL backend with cold caches each time). With it, the fixup closes them every this
# many tasks, and compactweb.celery closes one that is broken or older than COMPACTWEB_WORKER_CONN_MAX_AGE before
# each task. Only workers run the fixup: web processes keep CONN_MAX_AGE 0, their request threads excepted
# (compactweb.request_threads).
CELERY_DB_REUSE_MAX = int(os.environ.get("COMPACTWEB_WORKER_DB_REUSE_MAX", "1000"))
# Celery beat, for deployments that run it: the retention archiver's task every hour; it runs the policy only when
# it is enabled and due (docs/retention-policy.md). The simulator scheduler's housekeeping sends the same task, and
# one conditional UPDATE makes sure a period's run happens once.
CELERY_BEAT_SCHEDULE = {
    "archive-ended-sessions": {"task": "sessions_app.archive.tasks.run_scheduled_archiver", "schedule": 3600.0},
    # Alert deliveries due again after a failed attempt, and the resolved message of a cause that stopped
    # (docs/alerts.md "Delivery"); the scheduler's housekeeping sends the same task, a claim per attempt keeps
    # one send per attempt.
    "retry-alert-deliveries": {"task": "sessions_app.compactions.alert_delivery.retry_due_task", "schedule": 15.0},
}

# Where retention writes its archive files (docs/retention-policy.md): the deployment's choice, never a page's.
COMPACTWEB_ARCHIVE_DIR = Path(os.environ.get("COMPACTWEB_ARCHIVE_DIR", str(VAR_DIR / "archive")))

# Prometheus metrics at /metrics (docs/operations.md, "Metrics"): a scraper sends this token as its bearer; unset,
# /metrics answers 404 (off). The scheduler's heartbeat file, when one runs (scripts/scale-out sets it), is read
# for its age.
COMPACTWEB_METRICS_TOKEN = os.environ.get("COMPACTWEB_METRICS_TOKEN", "")
COMPACTWEB_SCHEDULER_HEARTBEAT_FILE = os.environ.get("COMPACTWEB_SCHEDULER_HEARTBEAT_FILE", "")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
FORMAT_MODULE_PATH = ["compactweb.formats"]  # one date format for the pages and the admin (compactweb/formats)
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
secure_dir(VAR_DIR)
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns at start-up when it is missing
# Finders serve static files straight from apps and static/ so no collectstatic is needed for the embedded default.
WHITENOISE_USE_FINDERS = True

# -- Security (issue 14, docs/security.md) ------------------------------------------------------------------------

# One switch for HTTPS deployments: secure cookies, HSTS and the redirect to https (health checks stay on http).
COMPACTWEB_HTTPS = _env_bool("COMPACTWEB_HTTPS", False)
if COMPACTWEB_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    SECURE_HSTS_SECONDS = int(os.environ.get("COMPACTWEB_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("COMPACTWEB_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = _env_bool("COMPACTWEB_HSTS_PRELOAD", True)
# Behind a TLS-terminating proxy that sets (and strips clients' own) X-Forwarded-Proto.
if _env_bool("COMPACTWEB_TLS_PROXY_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content-Security-Policy (django-csp): scripts and styles from this origin only (style attributes are allowed for
# the meters' widths), no plugins, no framing, forms and websockets to this origin.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# Login rate limits (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from one address, that
# pair is locked out (429) for the cool-off time. Addresses come from REMOTE_ADDR only (no spoofable header).
AXES_FAILURE_LIMIT = int(os.environ.get("COMPACTWEB_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("COMPACTWEB_LOGIN_COOLOFF_HOURS", "0.25"))  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)

# Hooks (compaction_app.engine.hooks): callable hooks only from these module prefixes; every hook's timeout capped;
# a webhook answer larger than the cap fails the hook and is not stored.
COMPACTWEB_HOOK_CALLABLE_PREFIXES = [
    p.strip() for p in os.environ.get("COMPACTWEB_HOOK_CALLABLE_PREFIXES", "compactweb_hooks.").split(",") if p.strip()
]
COMPACTWEB_HOOK_MAX_TIMEOUT = float(os.environ.get("COMPACTWEB_HOOK_MAX_TIMEOUT", "60"))
COMPACTWEB_HOOK_MAX_RESPONSE_BYTES = int(os.environ.get("COMPACTWEB_HOOK_MAX_RESPONSE_BYTES", "65536"))

# Request bodies (compactweb.body_limit): larger ones answer 413 before they are read.
COMPACTWEB_MAX_REQUEST_BYTES = int(os.environ.get("COMPACTWEB_MAX_REQUEST_BYTES", str(8 * 1024 * 1024)))
COMPACTWEB_MAX_IMPORT_BYTES = int(os.environ.get("COMPACTWEB_MAX_IMPORT_BYTES", str(64 * 1024 * 1024)))
# One line of an imported rollout (issue 27): a longer one refuses the file as soon as it is read past this.
COMPACTWEB_MAX_IMPORT_LINE_BYTES = int(os.environ.get("COMPACTWEB_MAX_IMPORT_LINE_BYTES", str(4 * 1024 * 1024)))
# Django's own check on request.body must not refuse (with an HTML 400) what the limits above allow.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(COMPACTWEB_MAX_REQUEST_BYTES, COMPACTWEB_MAX_IMPORT_BYTES)

# API throttling per user (compactweb.throttles); counts are per process with the default local-memory cache.
COMPACTWEB_THROTTLE_RATES = {"user": os.environ.get("COMPACTWEB_THROTTLE_USER", "6000/minute")}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "compactweb.api_tokens.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "compactweb.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["compactweb.throttles.UserThrottle"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "compactweb.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
# API tokens are stored hashed by django-rest-knox and never expire unless revoked (create_user --rotate-token).
REST_KNOX = {"TOKEN_TTL": None, "AUTH_HEADER_PREFIX": "Token", "AUTO_REFRESH": False}
SPECTACULAR_SETTINGS = {
    "TITLE": "compactweb API",
    "DESCRIPTION": "Sessions, rollouts and context compaction for LLM agent sessions.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Anonymous users see only the login page (design), so the schema needs the operator role like every read.
    "SERVE_PERMISSIONS": ["compactweb.roles.IsOperator"],
    # The compact request's `method` and its deprecated alias `strategy` share one choice set (issue 19).
    "ENUM_NAME_OVERRIDES": {"CompactionMethodEnum": "sessions_app.web.api.compaction_serializers.STRATEGY_CHOICES"},
    # compactweb.converters: a row id, 1 to 2**63 - 1 (a larger one does not resolve: 404, issue 27).
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}},
}

# Security (issue 14, docs/security.md).
# Environment variables whose values may be sent to a provider (api_key_env, header values from the environment):
# names starting with this prefix (empty = no prefix rule) or listed in COMPACTWEB_SECRET_ENV_NAMES.
COMPACTWEB_SECRET_ENV_PREFIX = os.environ.get("COMPACTWEB_SECRET_ENV_PREFIX", "COMPACTWEB_KEY_").strip()
COMPACTWEB_SECRET_ENV_NAMES = [n.strip() for n in os.environ.get("COMPACTWEB_SECRET_ENV_NAMES", "").split(",") if n.strip()]
# Open websockets re-check their user this often (seconds) besides the immediate re-check a change made through
# Django sends (compactweb.ws_revocation): the bound on a socket outliving access taken away by SQL.
COMPACTWEB_WS_AUTH_RECHECK_SECONDS = float(os.environ.get("COMPACTWEB_WS_AUTH_RECHECK_SECONDS", "30"))
# Refuse provider and webhook URLs whose host is loopback, private or link-local (issue 27: on by default), except
# the hosts, host:port pairs and networks listed in COMPACTWEB_OUTBOUND_ALLOW (comma-separated), e.g. a local model
# server: COMPACTWEB_OUTBOUND_ALLOW=127.0.0.1:11434,10.1.0.0/16. Checked on save and again before each send.
COMPACTWEB_OUTBOUND_DENY_PRIVATE = _env_bool("COMPACTWEB_OUTBOUND_DENY_PRIVATE", True)
COMPACTWEB_OUTBOUND_ALLOW = [e.strip() for e in os.environ.get("COMPACTWEB_OUTBOUND_ALLOW", "").split(",") if e.strip()]
# Which base URLs each secret variable may be sent to (issue 27): "NAME=URL URL;NAME2=URL". A provider naming a
# variable in api_key_env or header_envs must have a base URL at or under one of that variable's URLs, checked on
# save and before each send; a variable listed nowhere is sent nowhere.
COMPACTWEB_PROVIDER_KEYS = os.environ.get("COMPACTWEB_PROVIDER_KEYS", "")

# The simulated model at /sim/ for outside clients (compactweb.sim_mount): on in the embedded default; a real
# deployment turns it off with COMPACTWEB_SIM_ENABLED=0. Outside callers authenticate with
# `Authorization: Bearer $COMPACTWEB_SIM_TOKEN`, an operator's API token, or a dashboard login.
COMPACTWEB_SIM_ENABLED = _env_bool("COMPACTWEB_SIM_ENABLED", True)
COMPACTWEB_SIM_TOKEN = os.environ.get("COMPACTWEB_SIM_TOKEN", "")
# The retry backoff of the engine and the provider client waits real time times this (spec §6.2: 200 ms doubling);
# 0 skips the waits (the test suite does, so retried failures stay fast).
COMPACTWEB_RETRY_BACKOFF_SCALE = float(os.environ.get("COMPACTWEB_RETRY_BACKOFF_SCALE", "1"))
COMPACTWEB_SIM_MAX_BODY_BYTES = int(os.environ.get("COMPACTWEB_SIM_MAX_BODY_BYTES", str(4 * 1024 * 1024)))

# Alert delivery (issue 45, docs/alerts.md "Delivery"): a failed send is retried after RETRY_SECONDS, doubling up to
# RETRY_MAX_SECONDS, and is a dead letter after MAX_ATTEMPTS. PUBLIC_URL (the dashboard's address as people reach
# it, e.g. https://compactweb.example.com) puts a link to the session in each message; empty: no link.
COMPACTWEB_ALERT_RETRY_SECONDS = float(os.environ.get("COMPACTWEB_ALERT_RETRY_SECONDS", "30"))
COMPACTWEB_ALERT_RETRY_MAX_SECONDS = float(os.environ.get("COMPACTWEB_ALERT_RETRY_MAX_SECONDS", "1800"))
COMPACTWEB_ALERT_MAX_ATTEMPTS = int(os.environ.get("COMPACTWEB_ALERT_MAX_ATTEMPTS", "8"))
COMPACTWEB_PUBLIC_URL = os.environ.get("COMPACTWEB_PUBLIC_URL", "").rstrip("/")
# Email alert destinations go through Django's email backend: SMTP to EMAIL_HOST:EMAIL_PORT (the password from the
# environment only), or EMAIL_BACKEND=django.core.mail.backends.console.EmailBackend to print them.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "compactweb@localhost")

# Tokenizer used when a provider names none.
COMPACTWEB_DEFAULT_ENCODING = os.environ.get("COMPACTWEB_DEFAULT_ENCODING", "o200k_base")

# Codex interop (docs/codex-interop.md): a directory where the simulated model at /sim/v1 writes down every request
# it receives (off when empty), and a Codex sessions folder the dashboard follows live (off when empty).
COMPACTWEB_SIM_RECORD_DIR = os.environ.get("COMPACTWEB_SIM_RECORD_DIR", "")
COMPACTWEB_FOLLOW_ROLLOUTS_DIR = os.environ.get("COMPACTWEB_FOLLOW_ROLLOUTS_DIR", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # httpx logs every request at INFO: one line per simulated model call drowns the dashboard's own log.
    "loggers": {"httpx": {"level": os.environ.get("HTTPX_LOG_LEVEL", "WARNING")}},
}
