"""Two test runs on one Redis never meet (issue 26, item 16).

Two checkouts' ``scripts/test`` runs share the machine's Redis (and a third project's worker may too). Redis
database numbers do not separate them (both runs use the same numbers, and pub/sub ignores them), so every name a
run takes there carries its ``RUN_ID`` (tests/robotlab_django/settings.py): its Celery queue and every Celery key
(kombu's ``global_keyprefix``), its channel layer's channels and groups (channels-redis' ``prefix``), and the queue
of jobs that name none (``ROBOTLAB["TASK_QUEUE"]``). Another run here is the same settings file loaded with another
``ROBOTLAB_TEST_RUN_ID``, as a second checkout's processes load it.
"""

from __future__ import annotations

import asyncio
import runpy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from kombu import Queue

import tests.robotlab_django.settings as test_settings
from tests.robotlab_django.faults import reachable

#: The database of the other test files' brokers: the runs meet there unless their names differ.
REDIS_URL = "redis://127.0.0.1:6379/15"


def _run_settings(monkeypatch: pytest.MonkeyPatch, run_id: str) -> dict[str, Any]:
    """The test settings as a run with ``run_id`` on ``REDIS_URL`` loads them."""
    with monkeypatch.context() as patch:
        patch.setenv("ROBOTLAB_TEST_RUN_ID", run_id)
        patch.setenv("ROBOTLAB_TEST_REDIS_URL", REDIS_URL)
        return runpy.run_path(test_settings.__file__)


def _celery(values: dict[str, Any]) -> Celery:
    app = Celery(f"run-{uuid.uuid4().hex[:6]}", set_as_current=False)
    app.config_from_object({key.removeprefix("CELERY_").lower(): value for key, value in values.items()
                            if key.startswith("CELERY_")})
    return app


@pytest.fixture
def two_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The settings of this run and of another one (another checkout), both on the shared Redis."""
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached (scripts/services starts it)")
    yield _run_settings(monkeypatch, test_settings.RUN_ID), _run_settings(monkeypatch, uuid.uuid4().hex[:10])


def test_every_name_a_run_takes_on_a_shared_service_carries_its_run_id(monkeypatch: pytest.MonkeyPatch) -> None:
    run = test_settings.RUN_ID
    assert run in test_settings.CELERY_TASK_DEFAULT_QUEUE and run in test_settings.ROBOTLAB["TASK_QUEUE"]
    assert run in test_settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"]
    monkeypatch.setenv("ROBOTLAB_TEST_DB", "postgres")
    on_postgres = _run_settings(monkeypatch, run)
    assert run in on_postgres["DATABASES"]["default"]["TEST"]["NAME"]
    assert run in on_postgres["CHANNEL_LAYERS"]["default"]["CONFIG"]["prefix"]


def test_a_task_sent_by_one_run_is_invisible_to_another_runs_worker_on_the_same_queue_name(
        two_runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ours, theirs = (_celery(values) for values in two_runs)
    queue = "default"  # the worst case: both runs (or another project) consume a queue of the same name
    try:
        ours.send_task("robotlab_django.tasks.run_robot", args=(1,), queue=queue)
        with ours.connection_for_read() as ours_read, theirs.connection_for_read() as theirs_read:
            mine = Queue(queue).bind(ours_read.default_channel).queue_declare(passive=False)
            other = Queue(queue).bind(theirs_read.default_channel).queue_declare(passive=False)
        assert (mine.message_count, other.message_count) == (1, 0)
    finally:
        with ours.connection_for_write() as connection:
            Queue(queue).bind(connection.default_channel).purge()
        ours.close()
        theirs.close()


def test_a_group_message_of_one_run_never_reaches_another_runs_layer(
        two_runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    from channels_redis.core import RedisChannelLayer
    from channels_redis.pubsub import RedisPubSubChannelLayer

    async def deliveries(kind: type[Any]) -> tuple[bool, bool]:
        ours, theirs = (kind(**values["CHANNEL_LAYERS"]["default"]["CONFIG"]) for values in two_runs)
        group = "robotlab.thread.1"  # the first thread of a fresh database, in either run
        mine, other = await ours.new_channel(), await theirs.new_channel()
        await ours.group_add(group, mine)
        await theirs.group_add(group, other)
        try:
            await ours.group_send(group, {"type": "run.events", "events": []})
            received = await asyncio.wait_for(ours.receive(mine), 10)
            try:
                await asyncio.wait_for(theirs.receive(other), 0.5)  # sent before ours arrived: it would be here
                leaked = True
            except TimeoutError:
                leaked = False
            return received["type"] == "run.events", leaked
        finally:
            await ours.group_discard(group, mine)
            await theirs.group_discard(group, other)
            for layer in (ours, theirs):
                await (layer.close_pools() if hasattr(layer, "close_pools") else layer.flush())

    assert asyncio.run(deliveries(RedisChannelLayer)) == (True, False)
    assert asyncio.run(deliveries(RedisPubSubChannelLayer)) == (True, False)


def test_a_runs_keys_are_removed_at_its_end_and_no_other_runs() -> None:
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached (scripts/services starts it)")
    import redis

    from tests.run_keys import remove_run_keys

    ended, other = f"robotlab-test-{uuid.uuid4().hex[:10]}", f"robotlab-test-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.set(f"{ended}:_kombu.binding.default", "1")
        client.set(f"{other}:_kombu.binding.default", "1")
        assert remove_run_keys(ended) == 1
        assert client.exists(f"{ended}:_kombu.binding.default", f"{other}:_kombu.binding.default") == 1
    finally:
        client.delete(f"{other}:_kombu.binding.default")
        client.close()
