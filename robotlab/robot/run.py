"""One run of a robot: the hooks, the budget and the events around the run loop.

``Robot.arun`` renders the instructions, picks the run's memory (:func:`choose_memory`) and AgentSkills,
then calls :func:`run_robot`, which runs the rest inside the ``run`` hook family: it plans the run
(:func:`~robotlab.robot.plan.plan_run`: model, tools, MCP servers, callbacks, limits), connects the MCP
servers the plan names, reserves the budgets and, inside the ``llm_generation`` family (learnings
prepended, history compacted when ``auto_compact`` asks), hands the plan's
:class:`~robotlab.robot.request.RunRequest` to :func:`~robotlab.robot.loop.run_loop`. Events
(``run.started`` ... ``stream.ended``) go to ``on_event`` when one is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import hooks, streaming, telemetry
from ..attachments import coerce_attachments
from ..messages import TextMessage
from ..result import RobotResult
from ..run_context import RunContext, running
from ..streaming import EventEmitter, failure_data
from ..tools.parking import RunParked
from .compaction import maybe_compact
from .loop import run_loop
from .request import RunRequest, RunUsage

if TYPE_CHECKING:
    from ..attachments import Attachment
    from ..budget import Budget, SharedBudget
    from ..memory import Memory
    from ..network import Network
    from .core import Robot
    from .plan import RunOptions

__all__ = ["choose_memory", "run_robot"]


def choose_memory(own: Callable[[], Memory], *, network: Network | None, network_memory: Memory | None,
                  memory: Memory | Mapping[str, Any] | None) -> Memory:
    """The memory a run uses.

    ``memory`` when it is one, else the network's, else the robot's own (``own()``); a dict ``memory`` is
    merged into it first.

    Args:
        own: The robot's own memory (created on first use).
        network: The network running the robot, if any.
        network_memory: The memory the network shares, if given.
        memory: The run's ``memory=``.
    """
    chosen: Memory = network_memory or getattr(network, "memory", None) or own()
    if memory is not None and not isinstance(memory, Mapping):
        return memory
    if memory:
        chosen.merge(memory)
    return chosen


async def run_robot(robot: Robot, message: object, options: RunOptions, *, memory: Memory) -> RobotResult:
    """Run ``robot`` on ``message`` inside the ``run`` hook family, with its hook scope.

    Its tools get a :class:`~robotlab.RunContext` with the run's ``deps``, its ``run_id`` (random when
    unset), the robot and the run's usage.

    Args:
        robot: The robot to run.
        message: The user's message (``None`` continues the conversation).
        options: The run's options.
        memory: The memory the run reads and writes.

    Raises:
        AttachmentError: an attachment cannot be sent (before anything else happens).
    """
    files = coerce_attachments(options.attachments)
    handlers = hooks.normalize_hooks(options.hooks)
    context = hooks.RunHookContext(robot=robot, network=options.network, task=options.task, memory=memory,
                                   config=robot.config, request=message)
    registries = (hooks.get_hooks(), getattr(options.network, "hooks", None), robot.hooks)
    run_id = options.run_id or uuid.uuid4().hex

    async def execute() -> RobotResult:
        emitter = EventEmitter(options.on_event, run_id=run_id) if options.on_event is not None else None
        return await _execute(robot, context, options, emitter=emitter, attachments=files, run_id=run_id)

    with hooks.with_hook_scope(registries, handlers):
        result = await telemetry.invoke_agent(
            robot.name, hooks.run("run", context, execute, registries=registries, per_run_hooks=handlers),
            model=robot.model, conversation_id=_conversation_id(message, memory), run_id=run_id,
            description=robot.description or None)
    if not isinstance(result, RobotResult):
        raise TypeError(
            f"Robot '{robot.name}': the run's hooks returned {result!r} instead of a RobotResult; "
            "an around_run hook must return the value of proceed()"
        )
    return result


def _conversation_id(message: object, memory: object) -> Any:
    """The run's thread or session id: the message's ``session_id``, else its memory's (``None`` when neither)."""
    return getattr(message, "session_id", None) or getattr(memory, "session_id", None)


async def _execute(robot: Robot, run_context: hooks.RunHookContext, options: RunOptions, *,
                   emitter: EventEmitter | None, attachments: Sequence[Attachment], run_id: str) -> RobotResult:
    message = run_context.request
    text = None if message is None else str(message)
    plan = robot._plan(options)
    await robot.mcp.connect(plan.mcp_servers, message=text)
    request = plan.request(text, robot.conversation, available_tools=robot.all_tools, budget=robot.budget,
                           emitter=emitter, shared_budgets=options.budgets, attachments=attachments)
    usage = RunUsage()
    with _budgets_held(robot.budget, options.budgets, usage):
        tool_context = RunContext(deps=options.deps, run_id=run_id, robot=robot, usage=usage)
        if emitter is not None:
            emitter.emit(streaming.RUN_STARTED, robot=robot.name, message=text)
        try:
            # tools add events to this run's stream (AskUser's channel) and read its RunContext
            with streaming.emitting(emitter), running(tool_context):
                result = await _generate(robot, request, usage, run_context)
        except BaseException as exc:
            if emitter is not None and isinstance(exc, asyncio.CancelledError):
                emitter.emit(streaming.RUN_CANCELLED, robot=robot.name)
                emitter.emit(streaming.STREAM_ENDED)
            elif emitter is not None and not isinstance(exc, RunParked):  # a parked run resumes later
                emitter.emit(streaming.RUN_FAILED, robot=robot.name, **failure_data(exc))
                emitter.emit(streaming.STREAM_ENDED)
            raise
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


@contextlib.contextmanager
def _budgets_held(budget: Budget, shared: Sequence[SharedBudget], usage: RunUsage) -> Iterator[None]:
    """Reserve the robot's and the shared budgets for the block; swap the reservations for ``usage`` after it."""
    reservations = budget.reserve()
    held: list[tuple[SharedBudget, dict[str, Any]]] = []
    try:
        for shared_budget in shared:
            held.append((shared_budget, shared_budget.reserve()))
        yield
    finally:
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
        await maybe_compact(robot, request.model, scope)
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
