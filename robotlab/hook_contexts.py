"""What hooks receive: :class:`HookContext` and the context of each hook family, and their per-run state.

Every context is a dataclass; ``ctx.local`` is the state of the hook handler being called (a
:class:`DotState`), ``ctx.ext(name)`` another handler's. They are re-exported by :mod:`robotlab.hooks`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "CompactionHookContext",
    "DotState",
    "ExtensionState",
    "HookContext",
    "LearnHookContext",
    "LlmGenerationHookContext",
    "NetworkRunHookContext",
    "RunHookContext",
    "TaskHookContext",
    "ToolCallHookContext",
]


# -- per-run state -------------------------------------------------------------------------------
class DotState:
    """A schemaless attribute bag: ``state.count = 1``; a key never set reads as ``None``."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_data", dict(data or {}))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_data":
            raise AttributeError(name)
        return self._data.get(name)

    def __setattr__(self, name: str, value: object) -> None:
        self._data[name] = value

    def __delattr__(self, name: str) -> None:
        self._data.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def merge_defaults(self, values: Mapping[str, Any]) -> DotState:
        """Set each of ``values`` whose key is not set yet; returns ``self``."""
        for key, value in values.items():
            self._data.setdefault(str(key), value)
        return self

    def to_dict(self) -> dict[str, Any]:
        """A copy of the values."""
        return dict(self._data)

    def __repr__(self) -> str:
        return f"DotState({self._data!r})"


class ExtensionState:
    """One :class:`DotState` per hook namespace, created on first access."""

    def __init__(self) -> None:
        self._states: dict[str, DotState] = {}

    def ext(self, name: str) -> DotState:
        """The state of namespace ``name``."""
        return self._states.setdefault(str(name), DotState())

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{namespace: values}`` for every namespace touched."""
        return {name: state.to_dict() for name, state in self._states.items()}


# -- contexts ------------------------------------------------------------------------------------
@dataclass(kw_only=True, eq=False)
class HookContext:
    """What a hook receives.

    ``ctx.local`` is the calling handler's own :class:`DotState`; ``ctx.ext(name)`` reads another namespace's. Both
    live as long as the context: one run.
    """

    event: str = ""
    metadata: ExtensionState = field(default_factory=ExtensionState)
    _namespace: str | None = field(default=None, init=False, repr=False)

    def ext(self, name: str) -> DotState:
        """The state of hook namespace ``name``."""
        return self.metadata.ext(name)

    @property
    def local(self) -> DotState:
        """The state of the handler being called; ``ValueError`` outside a hook call."""
        if self._namespace is None:
            raise ValueError("No hook namespace active")
        return self.ext(self._namespace)

    @contextlib.contextmanager
    def with_namespace(self, namespace: str | None) -> Iterator[HookContext]:
        """Make ``namespace`` the one ``local`` refers to for the duration of the block."""
        previous = self._namespace
        self._namespace = None if namespace is None else str(namespace)
        try:
            yield self
        finally:
            self._namespace = previous

    def to_dict(self) -> dict[str, Any]:
        """Every public field, plus ``metadata`` as a dict."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        data["metadata"] = self.metadata.to_dict()
        return data


@dataclass(kw_only=True, eq=False)
class RunHookContext(HookContext):
    """The ``run`` family.

    One ``robot.run``. ``before_run`` may rewrite ``request`` (it is what is sent); ``response`` is the
    :class:`~robotlab.RobotResult` once the run is done.
    """

    robot: Any
    request: Any = None
    network: Any = None
    task: Any = None
    memory: Any = None
    config: Any = None
    response: Any = None
    error: BaseException | None = None
    event: str = "run"


@dataclass(kw_only=True, eq=False)
class LlmGenerationHookContext(RunHookContext):
    """The ``llm_generation`` family.

    The model conversation of one run, tool loop included (it fires once per run). ``generation_response`` is its
    result. ``event`` is ``"run"``, as in RobotLab.
    """

    iteration: int = 0
    generation_response: Any = None


@dataclass(kw_only=True, eq=False)
class ToolCallHookContext(HookContext):
    """The ``tool_call`` family.

    One tool call. ``tool_result`` carries the result: an ``around_tool_call`` that sets it without calling
    ``proceed`` blocks the tool.
    """

    tool: Any
    tool_args: Any = None
    robot: Any = None
    tool_result: Any = None
    tool_error: BaseException | None = None
    tool_name: str = field(init=False, default="")
    event: str = "tool_call"

    def __post_init__(self) -> None:
        self.tool_name = str(getattr(self.tool, "name", None) or type(self.tool).__name__)


@dataclass(kw_only=True, eq=False)
class NetworkRunHookContext(HookContext):
    """The ``network_run`` family: one ``network.run``; ``context`` holds its run parameters."""

    network: Any
    context: Any = None
    memory: Any = None
    config: Any = None
    result: Any = None
    error: BaseException | None = None
    event: str = "network_run"


@dataclass(kw_only=True, eq=False)
class TaskHookContext(HookContext):
    """The ``task`` family: one task of a network run (robot registries are not consulted)."""

    task: Any
    network: Any = None
    robot: Any = None
    memory: Any = None
    config: Any = None
    result: Any = None
    error: BaseException | None = None
    task_name: str = field(init=False, default="")
    event: str = "task"

    def __post_init__(self) -> None:
        self.task_name = getattr(self.task, "name", "")
        if self.robot is None:
            self.robot = getattr(self.task, "robot", None)


@dataclass(kw_only=True, eq=False)
class LearnHookContext(HookContext):
    """The ``learn`` family: one ``robot.learn(text)``; ``stored`` tells whether it was new."""

    robot: Any
    text: str
    learnings_before: tuple[str, ...] = ()
    stored: bool = False
    error: BaseException | None = None
    event: str = "learn"

    def __post_init__(self) -> None:
        self.learnings_before = tuple(self.learnings_before)


@dataclass(kw_only=True, eq=False)
class CompactionHookContext(HookContext):
    """The ``compaction`` family.

    An automatic history compaction. An ``on_compaction`` hook that sets ``compacted_messages`` replaces the
    built-in compressor; the first value set wins.
    """

    robot: Any
    messages_before: tuple[Any, ...] = ()
    config: Any = None
    strategy: str = "context_window"
    error: BaseException | None = None
    event: str = "compaction"
    _compacted: list[Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.messages_before = tuple(self.messages_before)

    @property
    def compacted_messages(self) -> list[Any] | None:
        """The history that replaces ``messages_before`` (``None`` until set)."""
        return self._compacted

    @compacted_messages.setter
    def compacted_messages(self, messages: Iterable[Any] | None) -> None:
        if self._compacted is None and messages is not None:
            self._compacted = list(messages)

    @property
    def is_handled(self) -> bool:
        """Whether ``compacted_messages`` has been set."""
        return self._compacted is not None

    def to_dict(self) -> dict[str, Any]:
        """Every public field, ``compacted_messages`` and ``metadata``."""
        return {**super().to_dict(), "compacted_messages": self._compacted}
