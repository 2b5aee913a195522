"""What a tool may learn about the run that calls it: :class:`RunContext`.

A tool function (or a :class:`~robotlab.Tool` subclass's ``execute``) whose first parameter is annotated
``RunContext`` receives the context of the run in progress; that parameter is not part of the JSON schema the
model sees::

    @robotlab.tool
    def my_orders(ctx: robotlab.RunContext[Shop], status: str) -> list[str]:
        '''The user's orders with this status.'''
        return ctx.deps.orders_of(ctx.deps.user, status)

    robot.run("What did I order?", deps=Shop(user="alice"))

A run sets its context for its own duration (:func:`running`), so tools read it without the run loop handing
it over; a run started inside a tool (a delegated robot) sets its own. This module imports nothing of the
core at run time: it sits below the tools and the run loop.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_origin

if TYPE_CHECKING:
    from .robot import Robot
    from .robot.request import RunUsage

__all__ = ["DepsT", "RunContext", "context_parameter", "current_run_context", "running"]

#: The type of a run's ``deps``.
DepsT = TypeVar("DepsT")

_current: contextvars.ContextVar[RunContext[Any] | None] = contextvars.ContextVar("robotlab_run_context",
                                                                                  default=None)


@dataclass(frozen=True, slots=True)
class RunContext(Generic[DepsT]):
    """The run a tool is called in, given to a tool whose first parameter is annotated ``RunContext``.

    Attributes:
        deps: What the run was given as ``deps=`` (``robot.run``, ``arun``, ``stream``, ``astream``,
            ``network.run``; a delegated robot gets its delegator's), ``None`` when nothing was.
        run_id: The run's id: the ``run_id=`` it was given (the one its events carry), else a random one.
        robot: The robot whose run it is.
        usage: The run's token usage so far (``input_tokens``, ``output_tokens``, ``cost``), kept up to
            date as the run goes on.
    """

    deps: DepsT
    run_id: str
    robot: Robot
    usage: RunUsage


def current_run_context() -> RunContext[Any] | None:
    """The context of the run in progress in this task or thread, ``None`` outside a run."""
    return _current.get()


@contextlib.contextmanager
def running(context: RunContext[Any]) -> Iterator[RunContext[Any]]:
    """Make ``context`` the run in progress inside the ``with`` block (the runs of tools, delegations)."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def _is_context_annotation(annotation: object) -> bool:
    if isinstance(annotation, str):  # an annotation that could not be resolved: judge by its text
        text = annotation.replace(" ", "")
        return any(text == name or text.startswith(name + "[") for name in ("RunContext", "robotlab.RunContext"))
    return annotation is RunContext or get_origin(annotation) is RunContext


def context_parameter(fn: Callable[..., Any], hints: dict[str, Any], tool_name: str) -> str | None:
    """The name of ``fn``'s ``RunContext`` parameter (its first, ``self`` aside), ``None`` when it has none.

    ``hints`` are ``fn``'s resolved type hints (its raw annotations where they could not be resolved).

    Raises:
        TypeError: a parameter annotated ``RunContext`` is not the first one, or is keyword-only.
    """
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in {"self", "cls"}]
    for index, param in enumerate(params):
        if not _is_context_annotation(hints.get(param.name, param.annotation)):
            continue
        if index != 0 or param.kind not in {param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD}:
            raise TypeError(
                f"Tool '{tool_name}': the RunContext parameter '{param.name}' of {fn.__qualname__} must be its "
                "first parameter (after self), not keyword-only"
            )
        return param.name
    return None
