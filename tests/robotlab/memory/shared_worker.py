"""What the child processes of the shared-memory tests run (importable by a 'spawn' child)."""

from __future__ import annotations

import os
import time
from typing import Any

import robotlab.memory.waiting as waiting_module
from robotlab.memory import Memory, Waiter


def _report_waiting(results: Any) -> None:
    """Make each ``get(..., wait=...)`` of this process put ``("waiting",)`` on ``results`` as it starts to block."""

    class ReportingWaiter(Waiter):
        def wait(self, timeout: float | None = None) -> Any:
            results.put(("waiting",))
            return super().wait(timeout)

    waiting_module.Waiter = ReportingWaiter  # type: ignore[misc]


def wait_for_parent(url: str, namespace: str, results: Any) -> None:
    """Wait for ``"k"`` that the parent sets, report it and the changes heard, then sign off.

    Puts ``("waiting",)`` when its ``get("k", wait=...)`` blocks, ``("change", change_dict)``
    for each change of a key matching ``k*`` heard by a pattern subscription, and ``("woke",
    value)`` when the get returns. Writes ``"child:done"`` after waking; exits when the parent
    writes ``"bye"``.
    """
    memory = Memory(redis_url=url, namespace=namespace, network_name="support")
    memory.current_writer = "child_robot"
    memory.subscribe_pattern("k*", callback=lambda change: results.put(("change", change.to_dict())))
    _report_waiting(results)
    value = memory.get("k", wait=120)  # the parent gives up after 30 s: only a wake-up passes
    results.put(("woke", value))
    memory.set("child:done", os.getpid())
    memory.get("bye", wait=120)


def set_on_command(url: str, namespace: str, commands: Any) -> None:
    """Set each key read from ``commands`` to ``(monotonic_time, pid)``, until ``None``."""
    memory = Memory(redis_url=url, namespace=namespace)
    while (key := commands.get(timeout=60)) is not None:
        memory.set(key, [time.monotonic(), os.getpid()])


def use_inherited_memory(memory: Memory, results: Any) -> None:
    """In a forked child: wait for ``"k"`` through the parent's memory object and report the value."""
    _report_waiting(results)
    results.put(("woke", memory.get("k", wait=120)))  # the parent gives up after 30 s: only a wake-up passes
