"""Task and FlowResult: one step of a network, and the result that flows between steps.

A :class:`~robotlab.network.Network` wraps every robot in a :class:`Task`. The network hands each task a
:class:`FlowResult` (Ruby ``SimpleFlow::Result``); the task deep-merges its own ``context`` into the run
parameters, adds its tools, MCP servers, memory and config, and calls ``robot.call(result)``
(:meth:`robotlab.robot.Robot.call`), which runs the robot and returns a new result::

    result.value                        # the RobotResult of the step that just ran
    result.context["run_params"]        # the network's run parameters (message=..., and your own keys)
    result.context["classifier"]        # a RobotResult, keyed by ROBOT name (not task name)

How a robot step turns a result into a run (:func:`extract_run_context`): the run parameters are the
base; a ``dict`` value is merged over them; a :class:`~robotlab.result.RobotResult` value becomes the
``message`` (its reply), a ``str`` value is the message, any other value its ``str()``. So a root task
gets the network's message, and a task after another gets the upstream robot's reply as its message.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from . import hooks
from .errors import AttachmentError, BudgetExceeded
from .messages import TextMessage
from .result import RobotResult
from .run_config import RunConfig

if TYPE_CHECKING:
    from .memory import Memory
    from .robot import Robot

__all__ = ["RUN_OPTIONS", "FlowResult", "Step", "Task", "deep_merge", "extract_run_context", "run_robot_step"]

#: Run parameters that are options of ``Robot.arun`` rather than template parameters. A network puts
#: ``on_event``, ``on_content`` and ``hooks`` there when its run was given them, so every robot's run gets them.
RUN_OPTIONS: tuple[str, ...] = ("mcp", "tools", "memory", "network_memory", "network_config", "network", "task",
                                "on_event", "on_content", "hooks", "budgets", "attachments", "deps")

#: Other ``Robot.arun`` keywords: never taken from run parameters, so never template parameters either.
_CALL_ONLY = ("run_id",)

#: ``FlowResult._copy``'s "leave the value as it is" (``None`` is a value a step may give).
_SAME: Final = object()


class FlowResult:
    """What flows between the steps of a network (Ruby ``SimpleFlow::Result``).

    Every method returns a new result and leaves this one unchanged.

    Args:
        value: The step's output: the last :class:`~robotlab.result.RobotResult` once a robot ran
            (the run parameters before that).
        context: ``"run_params"`` plus one entry per robot name.
        errors: Error messages by key (each a list).
        activated_steps: The optional tasks this step activated.
    """

    def __init__(
        self,
        value: object = None,
        *,
        context: Mapping[str, Any] | None = None,
        errors: Mapping[str, list[str]] | None = None,
        activated_steps: Iterable[str] = (),
    ) -> None:
        self.value: Any = value  # whatever the last step gave: a RobotResult, the run parameters, a step's own
        self.context: dict[str, Any] = dict(context or {})
        self.errors: dict[str, list[str]] = {str(k): list(v) for k, v in (errors or {}).items()}
        self.activated_steps: list[str] = [str(s) for s in activated_steps]
        self._continue = True

    def _copy(
        self,
        *,
        value: object = _SAME,
        context: Mapping[str, Any] | None = None,
        errors: Mapping[str, list[str]] | None = None,
        activated_steps: Iterable[str] | None = None,
        is_continue: bool | None = None,
    ) -> FlowResult:
        """A copy of this result, with the fields given changed (``value`` may be changed to ``None``)."""
        result = FlowResult(
            self.value if value is _SAME else value,
            context=self.context if context is None else context,
            errors=self.errors if errors is None else errors,
            activated_steps=self.activated_steps if activated_steps is None else activated_steps,
        )
        result._continue = self._continue if is_continue is None else is_continue
        return result

    @property
    def is_continue(self) -> bool:
        """Whether the network goes on after this step (``False`` once a step called :meth:`halt`)."""
        return self._continue

    def continue_(self, value: object) -> FlowResult:
        """A result with ``value`` as its value (Ruby ``continue``)."""
        return self._copy(value=value)

    def halt(self, value: object = None) -> FlowResult:
        """A result that stops the network: no further task starts. ``value`` replaces the value unless ``None``."""
        return self._copy(value=self.value if value is None else value, is_continue=False)

    def with_context(self, key: str, value: object) -> FlowResult:
        """A result with ``context[key] = value``."""
        return self._copy(context={**self.context, str(key): value})

    def with_error(self, key: str, message: str) -> FlowResult:
        """A result with ``message`` appended to ``errors[key]``."""
        return self._copy(errors={**self.errors, str(key): [*self.errors.get(str(key), []), message]})

    def activate(self, *task_names: str | Iterable[str]) -> FlowResult:
        """A result that activates the optional tasks named (names or lists of names)."""
        names: list[str] = []
        for entry in task_names:
            names.extend([entry] if isinstance(entry, str) else [str(n) for n in entry])
        return self._copy(activated_steps=[*self.activated_steps, *names])

    @property
    def replies(self) -> dict[str, Any]:
        """The reply of every robot that ran so far, by robot name (from :attr:`context`).

        A nested network's entry gives its final reply.
        """
        replies = {}
        for key, value in self.context.items():
            if isinstance(value, FlowResult):
                value = value.value
            if isinstance(value, RobotResult):
                replies[key] = value.reply
        return replies

    def __repr__(self) -> str:
        keys = [k for k in self.context if k != "run_params"]
        return (
            f"FlowResult(value={self.value!r}, context_keys={keys}, errors={self.errors}, "
            f"activated_steps={self.activated_steps}, is_continue={self._continue})"
        )


def deep_merge(base: Mapping[Any, Any], override: Mapping[Any, Any]) -> dict[str, Any]:
    """``override`` over ``base``: nested dicts merge recursively, anything else (lists too) is replaced.

    Keys become ``str`` (Ruby symbolizes them). Neither argument is changed.
    """
    merged = {str(k): v for k, v in base.items()}
    for key, value in override.items():
        key = str(key)
        old = merged.get(key)
        merged[key] = deep_merge(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return merged


def extract_run_context(result: FlowResult) -> tuple[Any, dict[str, Any]]:
    """``(message, options)`` for the robot step that receives ``result`` (Ruby ``extract_run_context``).

    The run parameters are the base; the value is laid over them (a ``dict`` merges, a
    :class:`RobotResult` gives ``message=`` its reply, a ``str`` is the message, another value its
    ``str()``; ``None`` keeps the run parameters' message). The run options in :data:`RUN_OPTIONS`
    always come from the run parameters.
    """
    params = {str(k): v for k, v in (result.context.get("run_params") or {}).items()}
    specials = {key: params.pop(key) for key in RUN_OPTIONS if key in params}
    value = result.value
    if isinstance(value, Mapping):
        params.update({str(k): v for k, v in value.items() if str(k) not in RUN_OPTIONS})
    elif isinstance(value, RobotResult):
        params["message"] = value.last_text_content
    elif isinstance(value, str):
        params["message"] = value
    elif value is not None:
        params["message"] = str(value)
    message = params.pop("message", None)
    return message, {**params, **specials}


def error_result(robot_name: str, error: BaseException) -> RobotResult:
    """The result of a step whose robot raised: ``"Error: <ClassName>: <message>"`` from the assistant."""
    text = f"Error: {type(error).__name__}: {error}"
    return RobotResult(robot_name=robot_name, output=[TextMessage(role="assistant", content=text)])


async def run_robot_step(robot: Robot, result: FlowResult) -> FlowResult:
    """What :meth:`Robot.call` does: run ``robot`` on ``result`` and record its RobotResult.

    Extra run parameters are template parameters, passed only to a robot with a template. Any
    exception becomes an error result (see :func:`error_result`), so the network goes on, except a
    :class:`~robotlab.BudgetExceeded` of a shared (network) budget, which is raised. The
    returned result has ``context[robot.name]`` set and the RobotResult as its value.
    """
    message, options = extract_run_context(result)
    run_options = {key: options.pop(key) for key in RUN_OPTIONS if key in options}
    template_context = {k: v for k, v in options.items() if k not in _CALL_ONLY} if robot.template else {}
    start = time.monotonic()
    try:
        robot_result = await robot.arun(message, **run_options, **template_context)
    except BudgetExceeded as exc:
        if exc.scope is not None:  # the network's budget is spent: its run stops
            raise
        robot_result = error_result(robot.name, exc)
    except AttachmentError:  # the run's input is at fault, not this robot: the network's run stops
        raise
    except Exception as exc:
        robot_result = error_result(robot.name, exc)
    robot_result.duration = time.monotonic() - start
    return result.with_context(robot.name, robot_result).continue_(robot_result)


async def run_hooked(family: str, fn: Callable[[], Awaitable[FlowResult]], *, network: object,
                     per_run_hooks: object = None, **fields: Any) -> FlowResult:
    """Run ``fn`` inside the hook family ``family`` (``"network_run"`` or ``"task"``).

    The registries are the global one and the network's: a robot's own hooks never see these families.
    ``per_run_hooks`` are the hooks given to this network run (``network.run(..., hooks=...)``), after them.
    """
    context_class = hooks.NetworkRunHookContext if family == "network_run" else hooks.TaskHookContext
    context = context_class(network=network, **fields)
    registries = (hooks.get_hooks(), getattr(network, "hooks", None))
    result: FlowResult = await hooks.run(family, context, fn, registries=registries, per_run_hooks=per_run_hooks)
    return result


class Step(Protocol):
    """What a :class:`Task` runs: a robot, a network, or anything with a ``call(result)`` step (sync or async)."""

    def call(self, result: FlowResult) -> Awaitable[FlowResult] | FlowResult:
        """Run on ``result`` (the flow so far) and return the flow after this step."""
        ...


class Task:
    """A robot as a network step, with its own context, tools, MCP servers, memory and config (seed 002).

    :meth:`Network.task <robotlab.network.Network.task>` builds one; build it yourself only to drive
    steps by hand.

    Args:
        name: The task name.
        robot: The robot to run (anything with an ``async call(result)`` step).
        context: Deep-merged over the run parameters (nested dicts merge, lists are replaced).
        mcp: Put into the run parameters' ``mcp`` unless ``"none"``.
        tools: Put into the run parameters' ``tools`` unless ``"none"`` (``[]`` turns tools off).
        memory: A :class:`~robotlab.memory.Memory` used instead of the network's for this task, or a dict
            of values set into the run's memory first.
        config: A :class:`~robotlab.run_config.RunConfig` (or dict) merged over the network's config.
        network: The owning network (supplies the hooks and the default memory).
    """

    def __init__(
        self,
        *,
        name: str,
        robot: Step,
        context: Mapping[str, Any] | None = None,
        mcp: object = "none",
        tools: object = "none",
        memory: Memory | Mapping[str, Any] | None = None,
        config: RunConfig | Mapping[str, Any] | None = None,
        network: object = None,
    ) -> None:
        if context is not None and not isinstance(context, Mapping):
            raise TypeError(f"Task '{name}': context must be a dict, got {type(context).__name__}")
        self.name = str(name)
        self.robot = robot
        self.context: dict[str, Any] = dict(context or {})
        self.mcp = mcp
        self.tools = tools
        self.memory = memory
        self.config = config if config is None or isinstance(config, RunConfig) else RunConfig(**dict(config))
        self.network = network

    async def call(self, result: FlowResult) -> FlowResult:
        """Run the robot on ``result`` with this task's settings.

        It runs inside the ``task`` hooks (and the run's per-run ``hooks``, from the run parameters).
        """

        async def step() -> FlowResult:
            answer = self.robot.call(self.enhanced_result(result))
            flow: FlowResult = await answer if inspect.isawaitable(answer) else answer
            return flow

        memory = self.memory if self.memory is not None else getattr(self.network, "memory", None)
        per_run = (result.context.get("run_params") or {}).get("hooks")
        return await run_hooked("task", step, network=self.network, per_run_hooks=per_run, task=self,
                                robot=self.robot, memory=memory, config=self.config)

    def enhanced_result(self, result: FlowResult) -> FlowResult:
        """``result`` with this task's context, tools, MCP, memory, config and itself in the run parameters."""
        params = deep_merge(result.context.get("run_params") or {}, self.context)
        if not (isinstance(self.mcp, str) and self.mcp == "none"):
            params["mcp"] = self.mcp
        if not (isinstance(self.tools, str) and self.tools == "none"):
            params["tools"] = self.tools
        if self.memory is not None:
            params["memory"] = self.memory
        params["task"] = self
        if self.network is not None:
            params["network"] = self.network
        if self.config is not None:
            inherited = params.get("network_config")
            params["network_config"] = inherited.merge(self.config) if inherited is not None else self.config
        return result.with_context("run_params", params)

    def to_dict(self) -> dict[str, Any]:
        """``{name, robot: <robot name>, context, mcp, tools, memory: True}``; memory only when set."""
        data = {
            "name": self.name,
            "robot": getattr(self.robot, "name", None),
            "context": self.context,
            "mcp": self.mcp,
            "tools": self.tools,
            "memory": True if self.memory is not None else None,
        }
        return {k: v for k, v in data.items() if v is not None}

    def __repr__(self) -> str:
        return f"<Task {self.name!r} robot={getattr(self.robot, 'name', self.robot)!r}>"
