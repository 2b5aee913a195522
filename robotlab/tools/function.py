"""Tools made from typed Python functions: :func:`tool` and :class:`FunctionTool`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, overload

from .base import Tool, call_in_thread_or_await
from .schema import docstring_parts, run_context_parameter, signature_model

if TYPE_CHECKING:
    from ..robot import Robot

__all__ = ["FunctionTool", "tool"]


class FunctionTool(Tool):
    """A tool made from a typed Python function by :func:`tool`."""

    def __init__(
        self,
        fn: Callable[..., Any | Awaitable[Any]],
        *,
        name: str | None = None,
        description: str | None = None,
        robot: Robot | None = None,
        side_effect: bool = False,
        approve: bool = False,
    ) -> None:
        super().__init__(robot=robot)
        self.fn = fn
        self.side_effect = side_effect
        self.approve = approve
        self.name = name or fn.__name__
        summary, descriptions = docstring_parts(fn.__doc__)
        self.description = description if description is not None else summary
        self._context_parameter = run_context_parameter(fn, self.name)
        self._arguments_model = signature_model(fn, self.name, descriptions)  # type: ignore[misc]

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        return await call_in_thread_or_await(self.fn, *self._context_args(), **kwargs)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        """Call the wrapped function directly, as if it were not a tool."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, side_effect: bool = False, approve: bool = False
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
    side_effect: bool = False, approve: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function (sync or ``async``) into a :class:`Tool`.

    The schema comes from the type hints; the description and the per-argument
    descriptions from the docstring (a Google style arguments section). A first parameter
    annotated :class:`~robotlab.RunContext` receives the run's context and is left out of the schema::

        @robotlab.tool
        def get_weather(location: str, unit: Literal["c", "f"] = "c") -> dict:
            '''Current weather for a location.

            Args:
                location: City name, e.g. "Paris".
            '''

    Args:
        fn: The function; without it, ``tool(name=..., description=...)`` returns a decorator.
        name: The tool's name (the function's by default).
        description: The tool's description (the docstring's by default).
        side_effect: Whether a call changes something outside the run (:attr:`Tool.side_effect`).
        approve: Whether a person should approve a call before it runs (:attr:`Tool.approve`).
    """
    if fn is not None:
        return FunctionTool(fn, name=name, description=description, side_effect=side_effect, approve=approve)
    return lambda f: FunctionTool(f, name=name, description=description, side_effect=side_effect, approve=approve)
