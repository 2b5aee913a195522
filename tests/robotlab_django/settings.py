"""Django settings for the test suite.

The database is SQLite in memory by default. ``ROBOTLAB_TEST_DB=postgres`` selects the PostgreSQL
server on 127.0.0.1:5432 (user ``$PGUSER``, else ``postgres``; trust auth), or the URL in
``ROBOTLAB_TEST_DATABASE_URL``; pytest-django creates and drops ``test_robotlab`` there.
"""

from __future__ import annotations

import json
import os
from typing import Any

import dj_database_url


def _databases() -> dict[str, dict[str, object]]:
    choice = os.environ.get("ROBOTLAB_TEST_DB", "sqlite").strip().lower()
    if choice in {"postgres", "postgresql", "pg"}:
        user = os.environ.get("PGUSER", "postgres")
        url = os.environ.get("ROBOTLAB_TEST_DATABASE_URL") or f"postgres://{user}@127.0.0.1:5432/robotlab"
        return {"default": dict(dj_database_url.parse(url))}
    if choice != "sqlite":
        raise ValueError(f"ROBOTLAB_TEST_DB must be 'sqlite' or 'postgres', not {choice!r}")
    # ROBOTLAB_TEST_SQLITE_PATH: a file database shared with subprocesses (the Celery worker test)
    name = os.environ.get("ROBOTLAB_TEST_SQLITE_PATH", ":memory:")
    return {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": name,
                        "OPTIONS": {"transaction_mode": "IMMEDIATE"}}}


SECRET_KEY = "not-a-secret-only-for-tests"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DATABASES = _databases()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "robotlab_django",
    "tests.robotlab_django.robotapp",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.robotlab_django.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STATIC_URL = "/static/"
ROBOTLAB = {
    # the distributed-network worker tests run the celery executor (ROBOTLAB_TEST_EXECUTOR=celery)
    "EXECUTOR": os.environ.get("ROBOTLAB_TEST_EXECUTOR", "sync"),
    # and register their fan-out network (tests/robotlab_django/fanout.py) by dotted path
    "NETWORKS": json.loads(os.environ.get("ROBOTLAB_TEST_NETWORKS", "{}")),
    "NETWORK_MEMORY_URL": os.environ.get("ROBOTLAB_TEST_MEMORY_URL") or None,
    # the demo model without its streaming pace; benchmarks/streaming.py paces it its own way
    "LLM": os.environ.get("ROBOTLAB_TEST_LLM") or "tests.robotlab_django.settings.instant_demo_llm",
    # the hung-Redis fault test gives up on a send sooner than the 5 s default
    "STREAM_PUBLISH_TIMEOUT": float(os.environ.get("ROBOTLAB_TEST_PUBLISH_TIMEOUT", "5")),
}

# Live runs: the in-memory layer by default; ROBOTLAB_TEST_REDIS_URL switches the layer to channels-redis.
# Celery (the worker test and benchmarks/streaming.py) uses the Redis on 127.0.0.1:6379, database 15.
REDIS_URL = os.environ.get("ROBOTLAB_TEST_REDIS_URL", "")
# socket_timeout None: redis-py 8 defaults to 5 s, which breaks channels-redis' blocking BZPOPMIN
# (django/channels_redis#422: every idle consumer dies with "Timeout reading from ..." after 5 s).
CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                              "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]}}
                  if REDIS_URL else {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_BROKER_URL = REDIS_URL or "redis://127.0.0.1:6379/15"
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}


def instant_demo_llm() -> Any:
    """The offline demo model answering at once (its default pace, 20 ms a word, is for people watching)."""
    from robotlab.testing import DemoLLM

    return DemoLLM(delay=0)


instant_demo_llm.is_demo_model = True  # type: ignore[attr-defined]  # the pages announce the demo model
