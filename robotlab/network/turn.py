"""The scheduling state of one network turn: which tasks may start, which finished, which were skipped.

:class:`TurnState` is the network's DAG scheduler as data. It holds no robots, events or processes, only
names and results, so the same state machine serves a run in one process (:meth:`Network.arun
<robotlab.network.Network.arun>` is a loop over it) and a turn whose tasks run as separate jobs on
several workers (the state is stored with :meth:`TurnState.to_dict` and read back with
:meth:`TurnState.from_dict` between tasks)::

    state = network.turn_state()
    while not state.is_done:
        for name in await state.advance(network.router, params):   # started, to run now
            ...                                                  # later: state.complete(name, flow)
    result = state.final(params)

The rules are the seed's: a required task starts once all its dependencies are done; a task whose
dependencies were all skipped is skipped; an optional task runs only when a finished task's result
activates it (``result.activate("billing")``) or the network's router names it, and an optional task no
one activates is skipped; a result that halts stops every task not started yet. The input a task receives
(:meth:`TurnState.input`) is its dependencies' results merged, with the last one's value, exactly as in a
single-process run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from ..errors import ConfigurationError
from ..task import FlowResult
from .stored import Results

__all__ = ["COMPLETED", "FAILED", "PENDING", "RUNNING", "SKIPPED", "Router", "TurnState", "merge_results"]

#: A task's status in a turn.
PENDING, RUNNING, COMPLETED, FAILED, SKIPPED = "pending", "running", "completed", "failed", "skipped"

#: ``router(flow_result) -> task name | list | None`` (or an awaitable of it).
Router = Callable[[FlowResult], Any]

_GRAPH, _TASK, _ROUTER = "graph", "task", "router"
_FORMAT = 2
#: The stored formats read: 1 held every context entry in full (:mod:`~robotlab.network.stored`).
_READ_FORMATS = (1, 2)


def _as_results(results: Mapping[str, FlowResult]) -> Results:
    """``results`` (a plain mapping someone assigned to a state) as :class:`Results`."""
    converted = Results()
    for name, result in results.items():
        converted[name] = result
    return converted


def merge_results(results: Sequence[FlowResult], run_params: object, value: object) -> FlowResult:
    """One result from several: contexts merged in order (robot entries), errors concatenated."""
    context: dict[str, Any] = {"run_params": run_params}
    errors: dict[str, list[str]] = {}
    for result in results:
        context.update((k, v) for k, v in result.context.items() if k != "run_params")
        for key, messages in result.errors.items():
            bucket = errors.setdefault(key, [])
            bucket.extend(m for m in messages if m not in bucket)
    return FlowResult(value, context=context, errors=errors)


class TurnState:
    """Where one turn of a network stands (see the module docs).

    Args:
        network: The network's name (for error messages).
        dependencies: ``task -> dependency names`` (``[]`` for a root, ``None`` for an optional task), in
            declaration order, groups expanded (:meth:`Network.dependencies
            <robotlab.network.Network.dependencies>`).
    """

    def __init__(self, network: str, dependencies: Mapping[str, list[str] | None]) -> None:
        self.network = str(network)
        self.dependencies: dict[str, list[str] | None] = {
            str(k): None if v is None else [str(d) for d in v] for k, v in dependencies.items()}
        self.status: dict[str, str] = dict.fromkeys(self.dependencies, PENDING)
        self.parents: dict[str, list[str]] = {}  # started (or about to start) tasks -> what feeds them
        self.sources: dict[str, str] = {}  # how each started task was started: graph, task or router
        self.queue: list[str] = []  # decided to start, not started yet, in start order
        self.results: MutableMapping[str, FlowResult] = Results()  # finished tasks, in finishing order
        self.errors: dict[str, str] = {}  # failed tasks -> "<ErrorType>: <message>"
        self.activated: list[str] = []
        self.halted_by: str | None = None
        self.routed = True  # the router has not seen the latest results yet
        self.finished = False

    # -- what a task sees ----------------------------------------------------------------------
    @property
    def skipped(self) -> list[str]:
        """The tasks that will not run, in declaration order."""
        return [name for name, status in self.status.items() if status == SKIPPED]

    @property
    def running(self) -> list[str]:
        """The tasks started and not finished, in declaration order."""
        return [name for name, status in self.status.items() if status == RUNNING]

    @property
    def is_done(self) -> bool:
        """Whether the turn is over: nothing runs, nothing is left to start, or a task failed."""
        return self.finished or bool(self.errors)

    @property
    def failed(self) -> str | None:
        """The first task that failed, or ``None``."""
        return next(iter(self.errors), None)

    def input(self, name: str, run_params: object) -> FlowResult:
        """The result task ``name`` is called with.

        Its parents' results merged, valued by the last one (by the run parameters for a root and for a task the
        router started).

        Args:
            name: A started task.
            run_params: The turn's run parameters (the message and the run options).

        Raises:
            KeyError: ``name`` has not been started.
        """
        if name not in self.parents:
            raise KeyError(f"Task '{name}' of network '{self.network}' has not been started")
        finished = [self.results[p] for p in self.parents[name]]
        value = run_params if self.sources[name] == _ROUTER or not finished else finished[-1].value
        return merge_results(finished, run_params, value)

    def accumulated(self, run_params: object) -> FlowResult:
        """Every finished result merged, valued by the last one (what the router is asked with)."""
        finished = list(self.results.values())
        return merge_results(finished, run_params, finished[-1].value if finished else run_params)

    def final(self, run_params: object) -> FlowResult:
        """The turn's result.

        Every finished result merged, valued by the halting task's result or by the last-declared finished task
        nothing depends on (the run parameters when none ran); halted when a task halted.
        """
        upstream = {p for parents in self.parents.values() for p in parents}
        sinks = [n for n in self.dependencies if n in self.results and n not in upstream]
        if self.halted_by is not None:
            value = self.results[self.halted_by].value
        else:
            value = self.results[sinks[-1]].value if sinks else run_params
        merged = merge_results(list(self.results.values()), run_params, value)
        result = FlowResult(value, context=merged.context, errors=merged.errors, activated_steps=self.activated)
        return result if self.halted_by is None else result.halt()

    # -- moving on -----------------------------------------------------------------------------
    def ready(self) -> list[str]:
        """The tasks to start now: those activated, then the required ones whose dependencies are done.

        Skips (for good) a required task whose dependencies were all skipped. Nothing new is ready once a
        task halted, except what was activated before. Asking again without :meth:`start` gives the same.
        """
        changed = True
        while changed and self.halted_by is None:
            changed = False
            for name, deps in self.dependencies.items():
                if deps is None or name in self.parents or self.status[name] == SKIPPED:
                    continue
                if not deps:
                    self._queue(name, [], _GRAPH)
                elif all(self.status[d] in (COMPLETED, SKIPPED) for d in deps):
                    ran = [d for d in deps if self.status[d] == COMPLETED]
                    if ran:
                        self._queue(name, ran, _GRAPH)
                    else:
                        self.status[name] = SKIPPED
                else:
                    continue
                changed = True
        return list(self.queue)

    def start(self, name: str) -> None:
        """Mark the ready task ``name`` as running.

        Raises:
            ValueError: ``name`` is not ready (see :meth:`ready`).
        """
        if name not in self.queue:
            raise ValueError(f"Task '{name}' of network '{self.network}' is not ready to start "
                             f"(its status is {self.status.get(name, 'unknown')})")
        self.queue.remove(name)
        self.status[name] = RUNNING

    def complete(self, name: str, result: FlowResult) -> None:
        """Record the finished task's result: a halt stops what has not started; its activations start.

        Raises:
            ValueError: ``name`` is not running.
            ConfigurationError: the result activated a task the network does not have.
        """
        self._check_running(name)
        self.status[name] = COMPLETED
        self.results[name] = result
        self.routed = True
        if not result.is_continue and self.halted_by is None:
            self.halted_by = name
        self.activate(result.activated_steps, f"Task '{name}'", [name], _TASK)

    def fail(self, name: str, error: BaseException | str) -> None:
        """Record that task ``name`` raised ``error``: the turn is over and failed (see :attr:`failed`)."""
        self._check_running(name)
        self.status[name] = FAILED
        self.errors[name] = error if isinstance(error, str) else f"{type(error).__name__}: {error}"

    def activate(self, names: Iterable[str], source: str, parents: list[str], how: str = _TASK) -> bool:
        """Queue the optional tasks ``names`` not started yet; ``True`` when one was queued.

        Args:
            names: Task names; a required or already started task is ignored.
            source: Who activates them, for the error message (``"Task 'x'"``, ``"The router"``).
            parents: The finished tasks whose results the activated tasks receive.
            how: ``"task"`` (the input's value is the last parent's) or ``"router"`` (the run parameters).

        Raises:
            ConfigurationError: a name is not a task of the network.
        """
        queued = False
        for name in names:
            if name not in self.dependencies:
                known = ", ".join(self.dependencies)
                raise ConfigurationError(
                    f"{source} activated unknown task '{name}' in network '{self.network}' (tasks: {known})")
            if self.dependencies[name] is None and name not in self.parents:
                self.activated.append(name)
                if self.halted_by is None:
                    self._queue(name, parents, how)
                    queued = True
        return queued

    def route(self, answer: object) -> bool:
        """Apply the router's ``answer`` (a task name, a list of them or ``None``).

        ``True`` when a task was queued. The activated tasks receive every result so far, valued by the run
        parameters.

        Raises:
            TypeError: ``answer`` is not a name, a list or ``None``.
            ConfigurationError: it names a task the network does not have.
        """
        self.routed = False
        if answer is None:
            return False
        if isinstance(answer, str):
            answer = [answer]
        elif not isinstance(answer, Iterable):
            raise TypeError(f"The router of network '{self.network}' must return a task name, a list or None, "
                            f"got {answer!r}")
        return self.activate([str(n) for n in answer], "The router", list(self.results), _ROUTER)

    def skip_unactivated(self) -> bool:
        """Skip the optional tasks no one activated; ``True`` when that skipped one (so others may follow)."""
        pending = [n for n, d in self.dependencies.items() if d is None and n not in self.parents]
        if pending and not all(self.status[n] == SKIPPED for n in pending):
            for name in pending:
                self.status[name] = SKIPPED
            return True
        return False

    async def advance(self, router: Router | None, run_params: object) -> list[str]:
        """Start and return the tasks to run now; ``[]`` while tasks run, or when the turn is over.

        When nothing runs and nothing is ready, the router (if any, and if it has not seen the latest
        results) is asked with :meth:`accumulated`; then the optional tasks nobody activated are skipped.
        When nothing is left, :attr:`is_done` becomes true.

        Raises:
            TypeError, ConfigurationError: the router's answer is invalid (see :meth:`route`).
        """
        while not self.is_done:
            names = self.ready()
            if names:
                for name in names:
                    self.start(name)
                return names
            if self.running:
                return []
            if self.halted_by is None:
                if router is not None and self.routed:
                    self.routed = False
                    answer = router(self.accumulated(run_params))
                    if inspect.isawaitable(answer):
                        answer = await answer
                    if self.route(answer):
                        continue
                if self.skip_unactivated():
                    continue
            self.finished = True
        return []

    # -- storing -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-ready data (orders kept as lists), for :meth:`from_dict`.

        Raises:
            TypeError: a task's result holds a value that cannot be stored as JSON.
        """
        return {
            "format": _FORMAT,
            "network": self.network,
            "dependencies": [[name, deps] for name, deps in self.dependencies.items()],
            "status": dict(self.status),
            "started": [[name, self.parents[name], self.sources[name]] for name in self.parents],
            "queue": list(self.queue),
            "results": self._dumped_results(),
            "errors": dict(self.errors),
            "activated": list(self.activated),
            "halted_by": self.halted_by,
            "routed": self.routed,
            "finished": self.finished,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnState:
        """The state :meth:`to_dict` stored.

        Raises:
            ValueError: ``data`` is not a stored turn state.
        """
        if not isinstance(data, Mapping) or data.get("format") not in _READ_FORMATS:
            raise ValueError(f"Not a stored network turn state (format {_FORMAT}): {str(data)[:80]!r}")
        state = cls(data["network"], dict(data["dependencies"]))
        state.status.update(data["status"])
        for name, parents, how in data["started"]:
            state.parents[name] = list(parents)
            state.sources[name] = how
        state.queue = list(data["queue"])
        state.results = Results((name, flow) for name, flow in data["results"])  # each loaded when asked for
        state.errors = dict(data["errors"])
        state.activated = list(data["activated"])
        state.halted_by = data["halted_by"]
        state.routed = bool(data["routed"])
        state.finished = bool(data["finished"])
        return state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TurnState) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<TurnState {self.network!r} {self.status}>"

    def _dumped_results(self) -> list[list[Any]]:
        results = self.results
        return (results if isinstance(results, Results) else _as_results(results)).dump()

    def _queue(self, name: str, parents: list[str], how: str) -> None:
        self.status[name] = PENDING
        self.parents[name] = list(parents)
        self.sources[name] = how
        self.queue.append(name)

    def _check_running(self, name: str) -> None:
        if self.status.get(name) != RUNNING:
            raise ValueError(f"Task '{name}' of network '{self.network}' is not running "
                             f"(its status is {self.status.get(name, 'unknown')})")

