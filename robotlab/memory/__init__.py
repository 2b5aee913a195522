"""Shared reactive memory: :class:`Memory`, :class:`StateProxy`, :class:`MemoryChange`, :class:`Waiter`.

A :class:`Memory` is the key-value store a robot keeps between runs and that the robots of a
network share. Robots hand values to each other through it: one writes with :meth:`Memory.set`,
another reads with :meth:`Memory.get` (``wait=`` blocks until the key exists) or
``await`` :meth:`Memory.aget`, and subscribers are told of every change::

    memory = robotlab.create_memory(data={"tier": "gold"})
    memory.subscribe("sentiment", callback=lambda change: print(change.key, change.value))
    memory.set("sentiment", {"score": 0.8})   # prints: sentiment {'score': 0.8}
    memory.get("sentiment", wait=5)            # -> {'score': 0.8}
    memory.get("entities", wait=0.5)           # AwaitTimeout: Timeout waiting for :entities after 0.5 seconds

Keys are ``str`` (anything else raises ``TypeError``). Five keys are reserved and have their own
accessors (:data:`RESERVED_KEYS`): ``data`` (a :class:`StateProxy`), ``results`` (robot results),
``messages`` (conversation messages), ``session_id`` and ``cache``. Only :meth:`Memory.set` (and
item assignment or :meth:`Memory.merge` on non-reserved keys, which call it) notifies
subscribers and wakes waiters; writes through ``memory.data`` and to reserved keys are silent.

**Reading.** ``get(key)`` returns the value or ``None``; ``get(a, b)`` returns ``{a: ..., b:
...}`` in the order asked (``None`` for a missing key). ``wait=True`` blocks until every key
exists; ``wait=<seconds>`` waits that long *for each missing key* and then raises
:class:`~robotlab.errors.AwaitTimeout`. A key that exists with the value ``None`` is returned
at once. ``memory[key]`` is ``get(key)`` (``None`` when missing, as in Ruby).

**Writing.** ``set(key, value)`` stores under a lock, wakes waiters, then calls subscribers.
Callbacks run synchronously, in subscription order, on the writer's thread before ``set``
returns, also inside a running event loop (keep them short there, since they run on the
loop). A write made from inside a callback is notified after the current callbacks finish
(writes are coalesced per thread, as RobotLab's single drainer does). A callback that raises
is logged to the ``robotlab.memory`` logger and the others still run. A coroutine callback is
started as a task on the running loop, or run to completion on the robotlab background loop
when there is none. A write by another process sharing a Redis namespace wakes this
process's waiters on a feed thread and reaches its subscribers on a delivery thread.

**current_writer** is the robot writing now (``Robot.run`` sets it and restores it). It is
kept per ``contextvars`` context, so robots running concurrently as asyncio tasks (or in
threads started with ``asyncio.to_thread``) each record their own name; a context that never
set it sees the value set last anywhere.

Processes share a memory through Redis: ``create_memory(redis_url=url, namespace=turn_id)`` in
each of them sees the same custom keys, and a write in one wakes the waiters and reaches the
subscribers of the others.

The package, one concept a module: :mod:`~robotlab.memory.store` (:class:`Memory`),
:mod:`~robotlab.memory.reserved` (the reserved keys), :mod:`~robotlab.memory.state`
(:class:`StateProxy`), :mod:`~robotlab.memory.waiting` (waiters),
:mod:`~robotlab.memory.changes` (:class:`MemoryChange`), :mod:`~robotlab.memory.subscriptions`
(key and pattern subscriptions), :mod:`~robotlab.memory.backends` (the storage protocol, the
dict backend, the choice), :mod:`~robotlab.memory.redis_backend` (Redis),
:mod:`~robotlab.memory.change_feed` (other processes' writes) and
:mod:`~robotlab.memory.response_cache` (:class:`ResponseCache`).
"""

from __future__ import annotations

from .changes import MemoryChange
from .reserved import RESERVED_KEYS
from .response_cache import ResponseCache
from .state import StateProxy
from .store import Memory, create_memory
from .waiting import TIMEOUT, Waiter

__all__ = [
    "RESERVED_KEYS",
    "TIMEOUT",
    "Memory",
    "MemoryChange",
    "ResponseCache",
    "StateProxy",
    "Waiter",
    "create_memory",
]
