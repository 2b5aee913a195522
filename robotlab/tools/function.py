"""Tools made from typed Python functions: :func:`tool` and :class:`FunctionTool`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, overload

from .base import Tool, call_in_thread_or_await
from .schema import docstring_parts, signature_model

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
    ) -> None:
        super().__init__(robot=robot)
        self.fn = fn
        self.name = name or fn.__name__
        summary, descriptions = docstring_parts(fn.__doc__)
        self.description = description if description is not None else summary
        self._arguments_model = signature_model(fn, self.name, descriptions)  # type: ignore[misc]

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        return await call_in_thread_or_await(self.fn, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, as if it were not a tool."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function (sync or ``async``) into a :class:`Tool`.

    The schema comes from the type hints; the description and the per-argument
    descriptions from the docstring (a Google style arguments section)::

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
    """
    if fn is not None:
        return FunctionTool(fn, name=name, description=description)
    return lambda f: FunctionTool(f, name=name, description=description)
