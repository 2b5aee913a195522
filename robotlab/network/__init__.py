"""Networks: robots as tasks of a DAG, run concurrently on asyncio with shared memory and routing.

::

    network = robotlab.create_network(name="support")
    network.task("classifier", classifier, depends_on="none")       # a root
    network.task("billing", billing, depends_on="optional")         # runs only when activated
    network.task("summary", summarizer, depends_on=["classifier"])  # after classifier
    result = network.run("I was charged twice")                     # a FlowResult

A task starts as soon as all its dependencies are done, so independent tasks run at the same time (up to
``max_concurrent_robots`` of the network's config, or ``concurrency=<n>``) and a run takes as long as its
critical path. Optional tasks run when a step activates them (``result.activate("billing")`` in a robot's
``call``) or when the network's ``router`` names them.

``network.run(message, on_event=callback)`` streams the run: the network's own events (``run.*``,
``step.*`` per task) and every robot's, all with the network run's ``run_id`` and ``seq``, each robot
event tagged with ``network``, ``task`` and ``robot`` in its data. A network can itself be the runnable
of another network's task (a nested network). See ``docs/guides/networks.md``.

The package, by concept: :mod:`~robotlab.network.core` (the :class:`Network` class),
:mod:`~robotlab.network.graph` (dependencies, cycles, drawings), :mod:`~robotlab.network.turn` (the
scheduling state of a turn, :class:`TurnState`, serializable so a turn's tasks can run as separate jobs on
several workers), :mod:`~robotlab.network.runner` (one task with its events; a whole turn in one process),
:mod:`~robotlab.network.codec` (results as JSON) and :mod:`~robotlab.network.broadcast`.
"""

from __future__ import annotations

from .broadcast import BROADCAST_KEY
from .core import CONCURRENCY_OPTIONS, Network, create_network
from .turn import TurnState

__all__ = ["BROADCAST_KEY", "CONCURRENCY_OPTIONS", "Network", "TurnState", "create_network"]
