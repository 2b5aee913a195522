"""Settings of the example project, from the environment, with the embedded default when a variable is absent.

========================  ====================================================================
variable                  effect (absent: the embedded default)
========================  ====================================================================
``DATABASE_URL``          any dj-database-url URL (``postgres://...``); else SQLite in this folder
``REDIS_URL``             channels-redis channel layer, Celery broker, ``EXECUTOR="celery"`` (so the
                          ``support`` network runs one Celery job per task, sharing its memory in
                          Redis); else the in-memory channel layer and the in-process executor
``REDIS_PREFIX``          the start of every Redis key and channel of this site (Celery's ``global_keyprefix``,
                          the channel layer's ``prefix``), for a Redis shared with another site; else the
                          libraries' own (Redis database numbers do not separate sites: pub/sub ignores them)
``ROBOTLAB_EXECUTOR``     force an executor: ``thread``, ``sync`` or ``celery``
``ROBOT_LAB_MODEL`` or a  a real model through litellm (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...);
provider key              else the offline demo model, which the page announces
``DJANGO_SECRET_KEY``     required when ``DJANGO_DEBUG=0``
``DJANGO_DEBUG``          ``1`` (default) or ``0``
``DJANGO_ALLOWED_HOSTS``  comma-separated (default ``127.0.0.1,localhost``)
``ROBOTLAB_LOGIN_REQUIRED``  ``0`` lets anonymous visitors chat in their session (default ``1``)
``ROBOTLAB_MCP_OAUTH``    ``1``: the MCP endpoint also takes django-oauth-toolkit's tokens, issued at ``/o/``
``ROBOTLAB_MCP_URL``      the MCP endpoint's absolute URL: serves its OAuth protected-resource metadata
``ROBOTLAB_A2A_PUSH_URLS``  comma-separated webhook URL prefixes A2A push notifications may go to (default none:
                          push notifications off); ``ROBOTLAB_A2A_PUSH_PRIVATE=1`` allows private hosts
========================  ====================================================================
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

import robotlab

BASE_DIR = Path(__file__).resolve().parent.parent


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None or value == "" else value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _flag("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or ""
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY when DJANGO_DEBUG=0.")
    SECRET_KEY = "django-insecure-robotlab-example-only-for-local-development"
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
                 if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",")
                        if o.strip()]

INSTALLED_APPS = [
    "daphne",  # first: runserver serves ASGI (HTTP and websockets)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "robotlab_django",
    "chat",
    "orders",  # the example's own data, which the "orders" robot works on (model tools, approvals)
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # static files under any server (daphne, uvicorn, gunicorn), not only runserver's; no collectstatic needed
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "example_site.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
ASGI_APPLICATION = "example_site.asgi.application"
WSGI_APPLICATION = None

DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # psycopg's pool (Django's advice under ASGI): daphne's handshakes and replays reuse connections instead
    # of opening one per query, which put B6's resync p99 at 280 ms instead of 90 ms (docs/django/live-runs.md)
    # (the postgres extra: psycopg[pool]). CONN_HEALTH_CHECKS: Django gives the pool psycopg's
    # check_connection, so a connection the server dropped (a restart, a failover) is replaced before a
    # request gets it
    DATABASES["default"]["OPTIONS"] = {"pool": {"min_size": 2, "max_size": 20}}
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # the in-process executor writes from a background thread: wait for the lock instead of failing
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # WAL: readers (the chat page, replay) don't wait for the run's writes (docs/django/live-runs.md, B2)
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL") or None
REDIS_PREFIX = os.environ.get("REDIS_PREFIX", "")
if REDIS_URL:
    # pub/sub: no per-process list capped at 100 messages, lower latency (docs/django/live-runs.md, B2)
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                                  "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                                             **({"prefix": f"{REDIS_PREFIX}asgi"} if REDIS_PREFIX else {})}}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_BROKER_URL = REDIS_URL or "memory://"
if REDIS_URL:  # kombu's Redis transport, guarded: a node survives a broker restart (docs/django/live-runs.md)
    CELERY_BROKER_TRANSPORT = "robotlab_django.workers.redis_broker:Transport"
if REDIS_PREFIX:  # kombu prefixes every key of the broker (queues, bindings, unacked messages) and its fanout
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": REDIS_PREFIX}
CELERY_TASK_DEFAULT_QUEUE = "default"  # the queue runs are sent to (ROBOTLAB["TASK_QUEUE"])
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

#: Whether a real model is configured (ROBOT_LAB_MODEL or a provider key); else the offline demo model.
LLM_CONFIGURED = robotlab.get_config().default_model() is not None
ROBOTLAB = {
    "EXECUTOR": os.environ.get("ROBOTLAB_EXECUTOR") or ("celery" if REDIS_URL else "thread"),
    "MAX_TOOL_ROUNDS": 8,
    # with Redis, a network turn's tasks (one Celery job each) share one memory there, a namespace per turn
    "NETWORK_MEMORY_URL": REDIS_URL,
    # what a message does while the chat robot's reply runs: enqueue (the default), reject, interrupt or steer
    "ROBOTS": {"chat": {"on_busy": os.environ.get("ROBOTLAB_ON_BUSY") or "enqueue"}},
    # A2A push notifications: the webhook URL prefixes allowed (comma-separated), and whether private hosts may be
    "A2A_PUSH_URLS": [url.strip() for url in os.environ.get("ROBOTLAB_A2A_PUSH_URLS", "").split(",") if url.strip()],
    "A2A_PUSH_PRIVATE": _flag("ROBOTLAB_A2A_PUSH_PRIVATE", False),
}
if not LLM_CONFIGURED:
    ROBOTLAB["LLM"] = "chat.robots.demo_llm"
#: The MCP endpoint's absolute URL (https://example.com/mcp/): its OAuth protected-resource metadata names it.
ROBOTLAB_MCP_URL = os.environ.get("ROBOTLAB_MCP_URL") or None
if _flag("ROBOTLAB_MCP_OAUTH", False):
    # OAuth 2.1 for the MCP endpoint (docs/django/mcp.md): django-oauth-toolkit's authorization server at /o/,
    # its scopes mcp, robots and robot:<name> (pip install "robotlab-py[protocols]")
    INSTALLED_APPS.append("oauth2_provider")
    OAUTH2_PROVIDER = {"SCOPES_BACKEND_CLASS": "robotlab_django.mcp.oauth.RobotScopes", "PKCE_REQUIRED": True}
ROBOTLAB_CHAT_LOGIN_REQUIRED = _flag("ROBOTLAB_LOGIN_REQUIRED", True)
ROBOTLAB_CHAT_ROBOT = "chat"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "robotlab:thread_list"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = not DEBUG

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True  # serve the apps' static files straight from their directories

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"robotlab_django": {"handlers": ["console"],
                                    "level": os.environ.get("ROBOTLAB_LOG_LEVEL", "INFO")}},
}
