"""10 - Memory: the reactive key-value store robots and networks share.

Shows ``set``/``get`` (one key or several), ``memory.data`` (a ``StateProxy``: dict and attribute access),
key and pattern subscriptions and the ``MemoryChange`` they receive, waiting for a key another thread
writes, ``keys``/``all_keys``, JSON round-trips, ``copy`` for an isolated clone, the reserved keys that cannot
be deleted, and ``clear`` versus ``reset``. It makes no LLM call.

Run it: ``python examples/10_memory.py``.
"""

from __future__ import annotations

import threading

import robotlab

memory = robotlab.create_memory(data={"customer": "Ada", "tier": "gold"})

print("1. runtime data through a StateProxy")
print(f"   memory.data.customer={memory.data.customer!r}, memory.data['tier']={memory.data['tier']!r}")
memory.data.tier = "platinum"
print(f"   after memory.data.tier = 'platinum': {memory.data.to_dict()}")

print("2. subscriptions")
changes: list[robotlab.MemoryChange] = []
memory.subscribe("status", callback=changes.append)


@memory.pattern_subscriber("score:*")
def on_score(change: robotlab.MemoryChange) -> None:
    print(f"   pattern score:* saw {change.key} = {change.value} (was {change.previous})")


memory.current_writer = "grader"
memory.set("status", "reviewing")
memory.set("status", "approved")
memory.set("score:clarity", 7)
memory.set("score:clarity", 9)
for change in changes:
    kind = "created" if change.is_created else "updated"
    print(f"   status {kind}: {change.previous!r} -> {change.value!r} by {change.writer}")

print("3. several keys at once, and waiting for one")
print(f"   get('status', 'score:clarity', 'missing') = {memory.get('status', 'score:clarity', 'missing')}")
threading.Timer(0.05, memory.set, args=("verdict", "ship it")).start()
print(f"   get('verdict', wait=5) = {memory.get('verdict', wait=5)!r}  (written by another thread)")
try:
    memory.get("never_written", wait=0.1)
except robotlab.AwaitTimeout as error:
    print(f"   get('never_written', wait=0.1) -> AwaitTimeout: {error}")

print("4. keys and serialization")
print(f"   keys(): {memory.keys()}")
print(f"   all_keys() starts with the reserved ones: {memory.all_keys()[:5]}")
restored = robotlab.Memory.from_json(memory.to_json())
print(f"   from_json(to_json()): status={restored.get('status')!r}, data={restored.data.to_dict()}")

print("5. copy, delete, clear and reset")
clone = memory.copy()
clone.set("status", "draft")
print(f"   the clone says {clone.get('status')!r}, the original still {memory.get('status')!r}")
print(f"   delete('score:clarity') returned {memory.delete('score:clarity')}")
try:
    memory.delete("data")
except ValueError as error:
    print(f"   delete('data') -> ValueError: {error}")
memory.clear()
print(f"   after clear(): keys={memory.keys()}, data kept={memory.data.to_dict()}")
memory.reset()
print(f"   after reset(): keys={memory.keys()}, data={memory.data.to_dict()}")
