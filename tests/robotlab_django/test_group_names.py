"""Thread groups are the project's own: two projects on one Redis never see each other's live events.

Redis pub/sub ignores the database number, so two channel layers on DB 13 and DB 14 with the same prefix
share every channel; the app's group names carry a prefix of the project (``ROBOTLAB["GROUP_PREFIX"]``,
by default derived from ``SECRET_KEY``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.test import override_settings

from robotlab_django.streaming.broadcast import group_prefix, thread_group
from tests.robotlab_django.settings import RUN_ID

REDIS = "redis://127.0.0.1:6379"
#: The same channel-layer prefix in both projects (as two projects left at channels' default "asgi" have).
LAYER_PREFIX = f"asgi-groups-{RUN_ID}"


def _layer(db: int) -> RedisPubSubChannelLayer:
    return RedisPubSubChannelLayer(hosts=[{"address": f"{REDIS}/{db}", "socket_timeout": None}], prefix=LAYER_PREFIX)


def _redis_up() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(f"{REDIS}/13", socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


async def _first_message(layer: RedisPubSubChannelLayer, channel: str) -> Any:
    return await asyncio.wait_for(layer.receive(channel), timeout=10)


@pytest.mark.skipif(not _redis_up(), reason="needs the Redis on 127.0.0.1:6379")
async def test_two_projects_on_one_redis_do_not_share_a_threads_group() -> None:
    project_a, project_b = _layer(13), _layer(14)
    try:
        with override_settings(SECRET_KEY="project-b-key"):
            group_b = thread_group(1)
            channel = await project_b.new_channel()
            await project_b.group_add(group_b, channel)
        with override_settings(SECRET_KEY="project-a-key"):
            group_a = thread_group(1)
            await project_a.group_send(group_a, {"type": "robotlab.events", "from": "a"})
        await project_b.group_send(group_b, {"type": "robotlab.events", "from": "b"})
        # Redis delivers one subscriber's messages in the order it took the PUBLISHes: a leak from A comes first
        assert (await _first_message(project_b, channel))["from"] == "b"
        assert group_a != group_b
        # the same project on another database number does reach it: the DB number isolates nothing
        with override_settings(SECRET_KEY="project-b-key"):
            await _layer(13).group_send(thread_group(1), {"type": "robotlab.events", "from": "b on db 13"})
        assert (await _first_message(project_b, channel))["from"] == "b on db 13"
    finally:
        await project_a.flush()
        await project_b.flush()


def test_the_group_prefix_is_the_projects_and_can_be_set(settings: Any) -> None:
    with override_settings(SECRET_KEY="one"):
        one = group_prefix()
        assert thread_group(7) == f"{one}.thread.7"
    with override_settings(SECRET_KEY="two"):
        assert group_prefix() != one and group_prefix().startswith("robotlab.")
    assert len(thread_group(10**18)) < 100  # channels' limit on group names
    settings.ROBOTLAB = {**settings.ROBOTLAB, "GROUP_PREFIX": "shop-prod"}
    assert thread_group(7) == "shop-prod.thread.7"
