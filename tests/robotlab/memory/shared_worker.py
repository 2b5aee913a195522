"""What the child processes of the shared-memory tests run (importable by a 'spawn' child)."""

from __future__ import annotations

import os
import time
from typing import Any

from robotlab.memory import Memory


def wait_for_parent(url: str, namespace: str, results: Any) -> None:
    """Wait for ``"k"`` that the parent sets, report it and the changes heard, then sign off.

    Puts ``("change", change_dict)`` for each change of a key matching ``k*`` heard by a
    pattern subscription, and ``("woke", value, monotonic_time)`` when ``get("k", wait=...)``
    returns. Writes ``"ready"`` once subscribed and ``"child:done"`` after waking; exits when
    the parent writes ``"bye"``.
    """
    memory = Memory(redis_url=url, namespace=namespace, network_name="support")
    memory.current_writer = "child_robot"
    memory.subscribe_pattern("k*", callback=lambda change: results.put(("change", change.to_dict())))
    memory.set("ready", os.getpid())
    value = memory.get("k", wait=120)  # the parent gives up after 30 s: only a wake-up passes
    results.put(("woke", value, time.monotonic()))
    memory.set("child:done", os.getpid())
    memory.get("bye", wait=30)


def set_on_command(url: str, namespace: str, commands: Any) -> None:
    """Set each key read from ``commands`` to ``(monotonic_time, pid)``, until ``None``."""
    memory = Memory(redis_url=url, namespace=namespace)
    while (key := commands.get(timeout=60)) is not None:
        memory.set(key, [time.monotonic(), os.getpid()])
