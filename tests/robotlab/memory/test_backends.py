"""Backend selection and the Redis backend on the real server: robotlab.memory.backends and redis_backend."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid
from typing import Any

import pytest

from robotlab.config import reload_config
from robotlab.errors import AwaitTimeout, ConfigurationError
from robotlab.memory import RESERVED_KEYS, Memory, MemoryChange
from tests.robotlab.memory.helpers import REDIS_URL, SignallingWaiter, result, run_in_thread

# ---- backend selection --------------------------------------------------------------------


def test_importing_memory_never_touches_redis() -> None:
    code = "import sys, robotlab.memory; print('redis' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"


def test_auto_uses_a_dict_without_a_configured_url() -> None:
    assert not Memory().is_redis
    assert not Memory(backend="auto").is_redis
    assert not Memory(backend="hash").is_redis


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="Unknown memory backend: 'disk'"):
        Memory(backend="disk")  # type: ignore[arg-type]


def test_auto_falls_back_to_a_dict_when_redis_is_unreachable(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://:secret@127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING, logger="robotlab.memory"):
        memory = Memory()
    assert not memory.is_redis
    assert "falls back" in caplog.text and "secret" not in caplog.text


def test_explicit_redis_that_is_unreachable_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOT_LAB_REDIS_URL", "redis://127.0.0.1:1/0")
    reload_config()
    with pytest.raises(ConfigurationError, match="Cannot use Redis at redis://127.0.0.1:1/0 for memory"):
        Memory(backend="redis")


# ---- Redis backend (the real server) ------------------------------------------------------
def test_auto_uses_redis_when_a_url_is_configured(redis_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    assert Memory().is_redis
    monkeypatch.delenv("REDIS_URL")
    monkeypatch.setenv("ROBOT_LAB_REDIS_URL", REDIS_URL)
    reload_config()
    assert Memory().is_redis
    assert not Memory(backend="hash").is_redis


def test_explicit_redis_defaults_to_localhost(redis_client: Any) -> None:
    memory = Memory(backend="redis")
    assert memory.is_redis
    assert memory._backend.url == "redis://127.0.0.1:6379/0"  # type: ignore[attr-defined]


def test_redis_stores_json_under_the_namespace(redis_memory: Memory, redis_client: Any) -> None:
    namespace = redis_memory._backend.namespace  # type: ignore[attr-defined]
    assert namespace.startswith("robot_lab:memory:")
    assert str(uuid.UUID(namespace.rsplit(":", 1)[1])) == namespace.rsplit(":", 1)[1]
    redis_memory.set("sentiment", {"score": 0.8, "tags": ["a"]})
    redis_memory.set("text", "123")
    redis_memory.set("nothing", None)
    assert redis_client.get(f"{namespace}:sentiment") == '{"score":0.8,"tags":["a"]}'
    assert redis_client.get(f"{namespace}:text") == '"123"'
    assert redis_client.get(f"{namespace}:nothing") == "null"
    assert redis_memory.get("text") == "123"  # a string stays a string
    assert redis_memory.get("sentiment") == {"score": 0.8, "tags": ["a"]}
    assert redis_memory.get("nothing", wait=0.05) is None and redis_memory.has_key("nothing")
    assert redis_memory.get("missing") is None and not redis_memory.has_key("missing")
    assert redis_client.get(f"{namespace}:data") is None  # reserved keys stay in the process


def test_redis_custom_key_operations(redis_memory: Memory) -> None:
    redis_memory.set("b", 2)
    redis_memory["a"] = (1, 2)
    assert redis_memory.get("a") == [1, 2]  # JSON round trip
    assert redis_memory.keys() == ["a", "b"]
    assert redis_memory.all_keys() == [*RESERVED_KEYS, "a", "b"]
    assert redis_memory.get("a", "b", "c") == {"a": [1, 2], "b": 2}  # only the keys present
    assert redis_memory.delete("a") == [1, 2] and redis_memory.delete("a") is None
    assert redis_memory.to_dict()["custom"] == {"b": 2}
    redis_memory.reset()
    assert redis_memory.keys() == []
    for index in range(600):
        redis_memory.set(f"k{index}", index)
    assert len(redis_memory.keys()) == 600
    redis_memory.clear()
    assert redis_memory.keys() == []


def test_redis_values_must_be_json(redis_memory: Memory) -> None:
    with pytest.raises(TypeError, match="Cannot store 'k' in the Redis memory backend"):
        redis_memory.set("k", object())
    assert not redis_memory.has_key("k")
    redis_memory.set("result", result())  # objects with to_dict() are stored as that dict
    assert redis_memory.get("result")["robot_name"] == "helper"


def test_redis_notifications_and_previous_values(redis_memory: Memory) -> None:
    changes: list[MemoryChange] = []
    redis_memory.subscribe("k", callback=changes.append)
    redis_memory.set("k", {"v": 1})
    redis_memory.set("k", {"v": 2})
    assert [(c.value, c.previous) for c in changes] == [({"v": 1}, None), ({"v": 2}, {"v": 1})]


def test_redis_blocking_reads(redis_memory: Memory, signalling_waiter: type[SignallingWaiter]) -> None:
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :k after 0\.05 seconds$"):
        redis_memory.get("k", wait=0.05)
    thread, box = run_in_thread(lambda: redis_memory.get("k", wait=5))
    assert signalling_waiter.entered.wait(5)
    redis_memory.set("k", "v")
    thread.join(5)
    assert box == {"value": "v"}


async def test_redis_aget(redis_memory: Memory) -> None:
    reader = asyncio.create_task(redis_memory.aget("k", wait=5))
    await asyncio.sleep(0)
    await asyncio.to_thread(redis_memory.set, "k", [1])
    assert await asyncio.wait_for(reader, 5) == [1]


def test_redis_copy_and_isolation(redis_memory: Memory) -> None:
    other = redis_memory.make()  # type: ignore[attr-defined]
    redis_memory.set("k", {"a": [1]})
    assert other.get("k") is None  # each memory has its own namespace
    clone = redis_memory.copy()
    try:
        assert clone.is_redis
        assert clone._backend.namespace != redis_memory._backend.namespace  # type: ignore[attr-defined]
        assert clone.get("k") == {"a": [1]}
        clone.set("k", 2)
        assert redis_memory.get("k") == {"a": [1]}
    finally:
        clone.clear()
