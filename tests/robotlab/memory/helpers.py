"""Shared helpers of the memory tests: sample messages and results, a thread runner, a signalling waiter."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from robotlab.memory import Waiter
from robotlab.messages import TextMessage, ToolMessage, ToolResultMessage
from robotlab.result import RobotResult

#: The Redis database of the single-process Redis tests (the cross-process tests use database 12).
REDIS_URL = "redis://127.0.0.1:6379/0"


class SignallingWaiter(Waiter):
    """A Waiter that announces when a thread starts waiting and records each timeout."""

    entered = threading.Event()
    timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> Any:
        type(self).timeouts.append(timeout)
        type(self).entered.set()
        return super().wait(timeout)


def answer(text: str = "Hi") -> TextMessage:
    return TextMessage(role="assistant", content=text, stop_reason="stop")


def result(name: str = "helper", text: str = "Hi") -> RobotResult:
    created = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    tool = ToolResultMessage(tool=ToolMessage(id="c1", name="lookup", input={"q": 1}), content={"data": 2})
    return RobotResult(robot_name=name, output=[answer(text)], tool_calls=[tool], created_at=created)


def run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def redis_or_skip(url: str = REDIS_URL) -> Any:
    """A client of the Redis at ``url``, or skip the test when it does not answer."""
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        pytest.skip(f"Redis is not reachable at {url}: {exc}")
    return client
