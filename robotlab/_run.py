"""Running a robot: one run around the run loop, a network step, a delegated run.

``Robot.arun`` picks the run's memory and AgentSkills, then calls :func:`run_robot`, which runs the
rest inside the ``run`` hook family: it connects the MCP servers the run needs, resolves its tools,
reserves the budget, builds the :class:`~robotlab._loop.RunRequest` and, inside the
``llm_generation`` family (learnings prepended, history compacted when ``auto_compact`` asks),
hands it to :func:`~robotlab._loop.run_loop`. Events (``run.started`` ... ``stream.ended``) go to
``on_event`` when one is given. :func:`step` runs a robot as a network task (``robot.call``), and
:func:`delegate` runs one on another robot's behalf (``robot.delegate``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import hooks, llm, streaming
from ._loop import RunCallbacks, RunRequest, RunUsage, run_loop
from ._runtime import get_loop, run_sync
from .attachments import coerce_attachments, content_chars
from .config import get_config
from .delegation import DelegationFuture
from .errors import DependencyError
from .messages import TextMessage
from .result import RobotResult
from .streaming import Chunk, Event, EventEmitter
from .tools.parking import RunParked

if TYPE_CHECKING:
    from .attachments import Attachment
    from .budget import Budget, SharedBudget
    from .memory import Memory
    from .robot import Robot
    from .run_config import RunConfig
    from .task import FlowResult

__all__ = ["DEFAULT_COMPACT_THRESHOLD", "DEFAULT_CONTEXT_WINDOW", "adelegate", "context_window", "delegate",
           "run_memory", "run_robot", "step"]

logger = logging.getLogger("robotlab")

#: The context window assumed when the model's is unknown.
DEFAULT_CONTEXT_WINDOW = 200_000
#: The share of the context window that triggers ``auto_compact="context_window"``.
DEFAULT_COMPACT_THRESHOLD = 0.80

#: Delegated runs in progress on a running event loop (kept referenced until they finish).
_delegations: set[asyncio.Task[Any]] = set()


def run_memory(robot: Robot, *, network: Any, network_memory: Memory | None,
               memory: Memory | Mapping[str, Any] | None) -> Memory:
    """The memory a run uses.

    ``memory`` when it is one, else the network's, else the robot's own; a dict ``memory`` is merged into it first.
    """
    chosen: Memory = network_memory or getattr(network, "memory", None) or robot.memory
    if memory is not None and not isinstance(memory, Mapping):
        return memory
    if memory:
        chosen.merge(memory)
    return chosen


async def run_robot(
    robot: Robot,
    message: Any,
    *,
    tools: Any,
    mcp: Any,
    network: Any,
    task: Any,
    memory: Any,
    network_config: RunConfig | None,
    per_run_hooks: Any,
    on_content: Callable[[Chunk], Any] | None,
    on_event: Callable[[Event], Any] | None,
    run_id: str | None,
    budgets: Sequence[SharedBudget] = (),
    attachments: Any = None,
) -> RobotResult:
    """Run ``robot`` on ``message`` and its ``attachments`` inside the ``run`` hook family, with its hook scope.

    Raises:
        AttachmentError: an attachment cannot be sent (before anything else happens).
    """
    files = coerce_attachments(attachments)
    if network_config is None and network is not None:
        network_config = getattr(network, "config", None)
    handlers = hooks.normalize_hooks(per_run_hooks)
    context = hooks.RunHookContext(
        robot=robot, network=network, task=task, memory=memory, config=robot.config, request=message
    )
    registries = (hooks.get_hooks(), getattr(network, "hooks", None), robot.hooks)

    async def execute() -> RobotResult:
        emitter = EventEmitter(on_event, run_id=run_id) if on_event is not None else None
        return await _execute(robot, context, tools=tools, mcp=mcp, network_config=network_config,
                              on_content=on_content, emitter=emitter, shared=budgets, attachments=files)

    with hooks.with_hook_scope(registries, handlers):
        result = await hooks.run("run", context, execute, registries=registries, per_run_hooks=handlers)
    if not isinstance(result, RobotResult):
        raise TypeError(
            f"Robot '{robot.name}': the run's hooks returned {result!r} instead of a RobotResult; "
            "an around_run hook must return the value of proceed()"
        )
    return result


async def _execute(robot: Robot, run_context: hooks.RunHookContext, *, tools: Any, mcp: Any,
                   network_config: RunConfig | None, on_content: Callable[[Chunk], Any] | None,
                   emitter: EventEmitter | None, shared: Sequence[SharedBudget] = (),
                   attachments: Sequence[Attachment] = ()) -> RobotResult:
    message = run_context.request
    text = None if message is None else str(message)
    model = robot.model
    client = robot.llm
    if model is None and isinstance(client, llm.LLMClient | llm.AutoLLM):
        get_config().require_model()
    await robot.mcp.connect(robot.resolve_mcp(mcp, network_config=network_config), message=text)
    selected = robot.resolve_tools(tools, network_config=network_config)
    budget = robot.budget
    reservations = budget.reserve()
    held: list[tuple[SharedBudget, dict[str, Any]]] = []
    try:
        for shared_budget in shared:
            held.append((shared_budget, shared_budget.reserve()))
    except BaseException:
        _reconcile(budget, reservations, held, RunUsage())
        raise
    own = robot.callbacks
    max_tool_rounds = robot.config.max_tool_rounds
    request = RunRequest(
        robot_name=robot.name,
        conversation=robot.conversation,
        request_text=text,
        llm=client,
        model=model,
        params=robot.llm_params,
        tools=selected,
        budget=budget,
        callbacks=RunCallbacks(content=[*own.content, *([on_content] if on_content else [])],
                               tool_call=own.tool_call, tool_result=own.tool_result),
        emitter=emitter,
        max_tool_rounds=max_tool_rounds if max_tool_rounds is not None else get_config().max_tool_rounds,
        doom_loop_threshold=robot.config.doom_loop_threshold,
        shared_budgets=list(shared),
        attachments=attachments,
    )
    usage = RunUsage()
    if emitter is not None:
        emitter.emit(streaming.RUN_STARTED, robot=robot.name, message=text)
    try:
        with streaming.emitting(emitter):  # tools (AskUser's channel) add events to this run's stream
            result = await _generate(robot, request, usage, run_context)
    except BaseException as exc:
        if emitter is not None and isinstance(exc, asyncio.CancelledError):
            emitter.emit(streaming.RUN_CANCELLED, robot=robot.name)
            emitter.emit(streaming.STREAM_ENDED)
        elif emitter is not None and not isinstance(exc, RunParked):  # a parked run resumes later
            emitter.emit(streaming.RUN_FAILED, robot=robot.name, error=str(exc), error_type=type(exc).__name__)
            emitter.emit(streaming.STREAM_ENDED)
        raise
    finally:
        _reconcile(budget, reservations, held, usage)
    if emitter is not None:
        emitter.emit(
            streaming.RUN_COMPLETED,
            robot=robot.name,
            reply=result.reply,
            stop_reason=result.stop_reason,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cost=result.cost,
        )
        emitter.emit(streaming.STREAM_ENDED)
    return result


def _reconcile(budget: Budget, reservations: dict[str, float], held: list[tuple[SharedBudget, dict[str, Any]]],
               usage: RunUsage) -> None:
    """Swap the robot's and the shared budgets' reservations for what the run used."""
    tokens = usage.input_tokens + usage.output_tokens
    budget.reconcile(reservations, tokens=tokens, cost=usage.cost)
    for shared_budget, held_reservations in held:
        shared_budget.reconcile(held_reservations, tokens=tokens, cost=usage.cost)


async def _generate(robot: Robot, request: RunRequest, usage: RunUsage,
                    run_context: hooks.RunHookContext) -> RobotResult:
    """Run the model conversation inside the ``llm_generation`` family.

    An ``around_llm_generation`` hook may skip the model by returning a :class:`RobotResult` or a
    reply string of its own.
    """
    scope = hooks.scope_for(robot.hooks)
    context = hooks.LlmGenerationHookContext(
        robot=robot,
        request=request.request_text,
        network=run_context.network,
        task=run_context.task,
        memory=run_context.memory,
        config=robot.config,
        metadata=run_context.metadata,
    )

    async def generate() -> RobotResult:
        request.request_text = robot.inject_learnings(request.request_text)
        await _maybe_compact(robot, scope)
        return await run_loop(request, usage)

    result = await hooks.run("llm_generation", context, generate, **scope._asdict())
    if isinstance(result, RobotResult):
        return result
    if isinstance(result, str):
        reply = TextMessage(role="assistant", content=result, stop_reason="stop")
        return RobotResult(robot_name=robot.name, output=[reply], stop_reason="stop", model=request.model)
    raise TypeError(
        f"Robot '{robot.name}': the llm_generation hooks returned {result!r} instead of a RobotResult or "
        "a reply string; an around_llm_generation hook must return the value of proceed()"
    )


def context_window(model: str | None) -> int:
    """``model``'s context window in tokens, as litellm knows it, else :data:`DEFAULT_CONTEXT_WINDOW`."""
    if model is None:
        return DEFAULT_CONTEXT_WINDOW
    try:
        info = llm.load_litellm().get_model_info(model)
        window = info.get("max_input_tokens") or info.get("max_tokens")
        return int(window) if window else DEFAULT_CONTEXT_WINDOW
    except Exception:
        return DEFAULT_CONTEXT_WINDOW


async def _maybe_compact(robot: Robot, scope: hooks.HookScope) -> None:
    """Compact the history before the model call when ``auto_compact`` asks for it.

    ``"context_window"``: when the estimated tokens of the instructions and history (characters / 4)
    reach ``compact_threshold`` (default 0.80) of the model's context window. A callable: always, by
    calling it with the robot. Either way inside the ``compaction`` family, whose ``on_compaction``
    hooks may supply the new history instead.
    """
    mode = robot.config.auto_compact
    conversation = robot.conversation
    if mode is None or mode == "none" or not conversation.messages:
        return
    if callable(mode):
        strategy = "custom"
    elif mode == "context_window":
        estimated = sum(content_chars(m.get("content")) for m in conversation.for_request()) // 4
        threshold = robot.config.compact_threshold
        share = DEFAULT_COMPACT_THRESHOLD if threshold is None else threshold
        if estimated < context_window(robot.model) * share:
            return
        strategy = "context_window"
    else:
        logger.warning("[%s] auto_compact: unknown strategy %r; skipping compaction", robot.name, mode)
        return
    context = hooks.CompactionHookContext(
        robot=robot, messages_before=tuple(robot.messages), config=robot.config, strategy=strategy
    )

    async def compact() -> None:
        await hooks.call("on_compaction", context, **scope._asdict())
        if context.compacted_messages is not None:
            robot.replace_messages(context.compacted_messages)
            return
        if callable(mode):
            outcome = mode(robot)
            if inspect.isawaitable(outcome):
                await outcome
        else:
            try:
                robot.compress_history()
            except DependencyError as exc:
                logger.warning("[%s] auto_compact: %s; skipping compaction", robot.name, exc)
                return
        context.compacted_messages = robot.messages

    await hooks.run("compaction", context, compact, **scope._asdict())


async def step(robot: Robot, result: FlowResult) -> FlowResult:
    """``robot`` as a network step (see :meth:`Robot.call <robotlab.robot.Robot.call>`)."""
    from .task import run_robot_step

    return await run_robot_step(robot, result)


def delegate(delegator: str, *, to: Any, task: Any, async_: bool = False,
             **run_kwargs: Any) -> RobotResult | DelegationFuture:
    """Have robot ``to`` run ``task`` (keyword arguments go to its ``run``) on behalf of robot ``delegator``.

    Synchronous by default: returns the delegatee's result with ``duration`` and ``delegated_by`` set.
    With ``async_=True`` it returns a :class:`DelegationFuture` at once: the run goes on as a task of
    the running event loop (or, called outside one, on RobotLab's background loop) and settles the future.
    """
    if not async_:
        return run_sync(adelegate(delegator, to=to, task=task, **run_kwargs))
    future = DelegationFuture(robot_name=str(to.name), delegated_by=delegator)
    work = adelegate(delegator, to=to, task=task, **run_kwargs)
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    job: asyncio.Task[Any] | concurrent.futures.Future[Any]
    if loop is not None:
        job = loop.create_task(work)
        _delegations.add(job)
        job.add_done_callback(_delegations.discard)
    else:
        job = asyncio.run_coroutine_threadsafe(work, get_loop())
    job.add_done_callback(lambda done: _settle(future, done))
    return future


async def adelegate(delegator: str, *, to: Any, task: Any, **run_kwargs: Any) -> RobotResult:
    """:func:`delegate`, awaited: the delegatee's result with ``duration`` and ``delegated_by`` set."""
    started = time.monotonic()
    result: RobotResult = await to.arun(task, **run_kwargs)
    result.duration = time.monotonic() - started
    result.delegated_by = delegator
    return result


def _settle(future: DelegationFuture, done: asyncio.Task[Any] | concurrent.futures.Future[Any]) -> None:
    """Settle ``future`` with the outcome of the finished delegated run ``done``."""
    if done.cancelled():
        future.reject(asyncio.CancelledError(f"Delegation to '{future.robot_name}' was cancelled"))
    elif (error := done.exception()) is not None:
        future.reject(error)
    else:
        future.resolve(done.result())
