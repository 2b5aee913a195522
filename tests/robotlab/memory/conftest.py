"""Fixtures of the memory tests: no Redis unless asked, a signalling waiter, Redis memories."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import robotlab.memory.waiting as waiting_module
from robotlab.config import reload_config
from robotlab.memory import Memory
from tests.robotlab.memory.helpers import REDIS_URL, SignallingWaiter, redis_or_skip


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Redis unless a test asks for it: no REDIS_URL, no config files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("ROBOT_LAB_REDIS_URL", raising=False)
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


@pytest.fixture
def signalling_waiter(monkeypatch: pytest.MonkeyPatch) -> type[SignallingWaiter]:
    SignallingWaiter.entered = threading.Event()
    SignallingWaiter.timeouts = []
    monkeypatch.setattr(waiting_module, "Waiter", SignallingWaiter)
    return SignallingWaiter


@pytest.fixture
def redis_client() -> Any:
    return redis_or_skip()


@pytest.fixture
def redis_memory(redis_client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    memories: list[Memory] = []

    def make(**kwargs: Any) -> Memory:
        memory = Memory(backend="redis", **kwargs)
        memories.append(memory)
        return memory

    memory = make()
    memory.make = make  # type: ignore[attr-defined]
    yield memory
    for each in memories:
        each.clear()
