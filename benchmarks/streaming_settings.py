"""Django settings for ``benchmarks/streaming.py``: the test settings plus the benchmark's choices.

``BENCH_SQLITE_JOURNAL=wal`` (the benchmark's default) opens SQLite in WAL mode with
``synchronous=NORMAL``, the setting Django's docs suggest for concurrent writers; ``delete`` keeps
SQLite's default rollback journal. ``BENCH_LAYER=pubsub`` uses channels-redis'
``RedisPubSubChannelLayer`` instead of ``RedisChannelLayer``; ``BENCH_LAYER=memory`` runs the in-process variant: the
in-memory channel layer, runs executed by the ``thread`` executor inside the daphne process.
``BENCH_PG_POOL=1`` gives PostgreSQL psycopg's connection pool (Django's ``"pool"`` option).
``BENCH_CAPACITY`` sets ``RedisChannelLayer``'s ``capacity`` (a small one makes it drop messages).
"""

from __future__ import annotations

import os

from tests.robotlab_django.settings import *  # noqa: F403
from tests.robotlab_django.settings import CHANNEL_LAYERS, DATABASES, ROBOTLAB

_database = DATABASES["default"]
if str(_database["ENGINE"]).endswith("sqlite3") and os.environ.get("BENCH_SQLITE_JOURNAL", "wal") == "wal":
    _database["OPTIONS"] = {**dict(_database.get("OPTIONS") or {}),  # type: ignore[call-overload]
                            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}
if os.environ.get("BENCH_PG_POOL") and str(_database["ENGINE"]).endswith("postgresql"):
    # psycopg's connection pool: daphne's handshakes then reuse connections instead of opening one per query
    _database["OPTIONS"] = {**dict(_database.get("OPTIONS") or {}),  # type: ignore[call-overload]
                            "pool": {"min_size": 2, "max_size": 40}}
if os.environ.get("BENCH_CAPACITY"):  # RedisChannelLayer drops messages to a channel holding this many
    CHANNEL_LAYERS = {"default": {**CHANNEL_LAYERS["default"], "CONFIG": {
        **CHANNEL_LAYERS["default"]["CONFIG"], "capacity": int(os.environ["BENCH_CAPACITY"])}}}
if os.environ.get("BENCH_LAYER") == "pubsub":
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                                  "CONFIG": CHANNEL_LAYERS["default"]["CONFIG"]}}
if os.environ.get("BENCH_CHANNEL_PREFIX") and "CONFIG" in CHANNEL_LAYERS["default"]:
    # this run's own channel names: Redis pub/sub ignores the database number, and the thread pks of two
    # benchmarks running at once (each on its own database) are the same, so their groups would mix
    CHANNEL_LAYERS = {"default": {**CHANNEL_LAYERS["default"], "CONFIG": {
        **CHANNEL_LAYERS["default"]["CONFIG"], "prefix": os.environ["BENCH_CHANNEL_PREFIX"]}}}
if os.environ.get("BENCH_LAYER") == "memory":
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    ROBOTLAB = {**ROBOTLAB, "EXECUTOR": "thread"}
