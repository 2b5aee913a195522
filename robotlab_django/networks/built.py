"""The networks built for distributed turns in this process, reused by the turn's next jobs here.

Every job of a distributed turn (:mod:`robotlab_django.networks.distributed`) needs the turn's network: built from
the registry with the app's settings, every robot holding the thread's history before the turn, the turn's budget
ledger attached. Building it (a fanout's ten robots) and reading the history cost more than a task's own work when
its model answers fast, and a worker process often runs several jobs of one turn: its start, some branches, the
reducer. :func:`take` keeps the network built for a turn and gives each later job of that turn in this process
what it needs of it, on two rules that keep a reused network the same as a new one:

* a robot runs once: a job takes its task's robot, and a job whose robot was taken already (a task run again in
  this process after a retry, a duplicate) gets a network built anew, as before;
* what a job sets on the network is its own: it gets a shallow copy (:func:`copy.copy`) with its own ``budget``
  attribute (a task replaying its checkpoints wraps it) and its own copy of the network's in-process memory, so
  tasks in one process share no more than tasks in two (``ROBOTLAB["NETWORK_MEMORY_URL"]`` shares it on purpose).

A network built with a job's own ``llm`` or factory options is not kept. The turn's entry goes when the turn ends
(:func:`forget`), and the oldest entries past :data:`KEPT` go first.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from robotlab.network import Network

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["KEPT", "Built", "forget", "take"]

#: How many turns' networks a process keeps at most (the least recently used go first).
KEPT = 64


@dataclass
class Built:
    """A turn's network as built here, and which of its robots jobs have taken.

    Attributes:
        network: The network, every robot holding the thread's history.
        history_length: How many of each robot's messages are that history.
        taken: The ids of the robots (task runnables) jobs have taken.
    """

    network: Network
    history_length: int
    taken: set[int] = field(default_factory=set)


_built: OrderedDict[int, Built] = OrderedDict()
_lock = threading.Lock()


def _view(built: Built) -> Network:
    """A job's own view of the kept network: its attributes its own, the tasks and robots shared."""
    network = copy.copy(built.network)
    if not built.network.memory.is_redis:
        network.memory = built.network.memory.copy()
    return network


def take(turn: RobotResult, task: str | None, build: Callable[[], tuple[Network, int]]) -> tuple[Network, int]:
    """``(network, history_length)`` for a job of ``turn`` that runs ``task`` (``None``: the turn's start).

    The network kept for the turn when its robot for ``task`` has not been taken; else a network from ``build()``
    (kept for the turn's next jobs when none is).
    """
    key = turn.pk
    with _lock:
        built = _built.get(key)
        if built is not None:
            _built.move_to_end(key)
            robot = id(built.network.tasks[task].robot) if task in built.network.tasks else None
            if robot is None or robot not in built.taken:
                if robot is not None:
                    built.taken.add(robot)
                return _view(built), built.history_length
    network, history_length = build()
    with _lock:
        if key in _built:  # another job of the turn built one meanwhile: this one is its own
            return network, history_length
        built = Built(network, history_length)
        _built[key] = built
        while len(_built) > KEPT:
            _built.popitem(last=False)
        if task in network.tasks:
            built.taken.add(id(network.tasks[task].robot))
        return _view(built), history_length


def forget(turn: RobotResult) -> None:
    """Drop the network kept for ``turn`` (its turn ended)."""
    with _lock:
        _built.pop(turn.pk, None)
