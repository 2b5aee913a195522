"""Django settings for the test suite.

The database is SQLite in memory by default. ``ROBOTLAB_TEST_DB=postgres`` selects the PostgreSQL
server on 127.0.0.1:5432 (user ``$PGUSER``, else ``postgres``; trust auth), or the URL in
``ROBOTLAB_TEST_DATABASE_URL``; pytest-django creates and drops ``test_robotlab_<RUN_ID>`` there.
``ROBOTLAB_TEST_DB_POOL=1`` gives it psycopg's connection pool, as the example project does (the benchmarks).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import dj_database_url

# One id per test run, inherited by the processes it starts: the names this run takes on shared services
# (PostgreSQL databases, Celery queues, Redis key and channel prefixes) carry it, so two checkouts' runs on one
# machine never meet.
#: Whether this process started the run (its processes inherit the id): only it removes the run's keys at the end.
OWNS_RUN = "ROBOTLAB_TEST_RUN_ID" not in os.environ
RUN_ID = os.environ.setdefault("ROBOTLAB_TEST_RUN_ID", uuid.uuid4().hex[:10])
#: This run's Celery queue (``CELERY_TASK_DEFAULT_QUEUE``, ``ROBOTLAB["TASK_QUEUE"]``): the test workers consume it.
TASK_QUEUE = f"robotlab-test-{RUN_ID}"
#: The start of every key and pub/sub channel this run's processes make on a shared Redis: Celery's (kombu's
#: ``global_keyprefix``: its queues, bindings, unacked messages and fanout), the channel layer's (channels-redis'
#: ``prefix``: channels and groups). Redis database numbers do not isolate runs (pub/sub ignores them; another
#: checkout's run uses the same numbers), so a run's names must differ, not its database.
REDIS_PREFIX = f"robotlab-test-{RUN_ID}"


def _databases() -> dict[str, dict[str, object]]:
    choice = os.environ.get("ROBOTLAB_TEST_DB", "sqlite").strip().lower()
    if choice in {"postgres", "postgresql", "pg"}:
        user = os.environ.get("PGUSER", "postgres")
        url = os.environ.get("ROBOTLAB_TEST_DATABASE_URL") or f"postgres://{user}@127.0.0.1:5432/robotlab"
        database: dict[str, object] = {**dj_database_url.parse(url), "TEST": {"NAME": f"test_robotlab_{RUN_ID}"}}
        if os.environ.get("ROBOTLAB_TEST_DB_POOL"):  # psycopg's pool, as the example project's settings
            database.update(OPTIONS={"pool": {"min_size": 2, "max_size": 20}}, CONN_HEALTH_CHECKS=True)
        return {"default": database}
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
    # a project's own data, for the model tools (robotlab_django.tools)
    "tests.robotlab_django.notesapp",
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
    # jobs that name no queue go to this run's queue, never to a "default" another checkout's worker consumes
    "TASK_QUEUE": TASK_QUEUE,
    # benchmarks/worker_first_job.py starts workers with their warm-up off too, for comparison
    "WORKER_WARM_UP": os.environ.get("ROBOTLAB_TEST_WORKER_WARM_UP", "1") == "1",
    # spans kept only where a test asks (tests/robotlab_django/tracing): the app would otherwise set its own SDK
    # tracer provider at the first run, the one the core's span tests (tests/robotlab/spans.py) set in this process
    "TRACES": os.environ.get("ROBOTLAB_TEST_TRACES") == "1",
    # the online evals' worker test scores the runs of its worker (tests/robotlab_django/evals/test_online_worker.py)
    "ONLINE_EVALS": json.loads(os.environ.get("ROBOTLAB_TEST_ONLINE_EVALS", "{}")),
}

# Live runs: the in-memory layer by default; ROBOTLAB_TEST_REDIS_URL switches the layer to channels-redis.
# Celery (the worker test and benchmarks/streaming.py) uses the Redis on 127.0.0.1:6379, database 15.
REDIS_URL = os.environ.get("ROBOTLAB_TEST_REDIS_URL", "")
# socket_timeout None: redis-py 8 defaults to 5 s, which breaks channels-redis' blocking BZPOPMIN
# (django/channels_redis#422: every idle consumer dies with "Timeout reading from ..." after 5 s).
CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                              "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                                         "prefix": f"{REDIS_PREFIX}:asgi"}}
                  if REDIS_URL else {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_BROKER_URL = REDIS_URL or "redis://127.0.0.1:6379/15"
CELERY_RESULT_BACKEND = CELERY_BROKER_URL  # its keys are task ids (uuids): no run meets another's
# kombu's Redis transport with the guard that keeps a node up through a broker Redis restart (issue 25, 7)
CELERY_BROKER_TRANSPORT = "robotlab_django.workers.redis_broker:Transport"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "global_keyprefix": f"{REDIS_PREFIX}:"}
CELERY_TASK_DEFAULT_QUEUE = TASK_QUEUE


def instant_demo_llm() -> Any:
    """The offline demo model answering at once (its default pace, 20 ms a word, is for people watching)."""
    from robotlab.testing import DemoLLM

    return DemoLLM(delay=0)


instant_demo_llm.is_demo_model = True  # type: ignore[attr-defined]  # the pages announce the demo model
