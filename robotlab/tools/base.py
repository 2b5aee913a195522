"""The tool a robot can call: the :class:`Tool` base class and ``Tool.create``.

A tool has a ``name``, a ``description`` and a JSON-schema ``parameters`` object. Calling it
validates the model's arguments against that schema; every failure (bad JSON, a missing
argument, an exception inside the tool) comes back to the model as the text
``"Error (<name>): <message>"`` so the run goes on and the model can correct itself.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .. import hooks, telemetry
from ..errors import ToolError
from ..run_context import RunContext, current_run_context, running
from .schema import (
    clean_schema,
    docstring_parts,
    format_validation_error,
    model_schema,
    run_context_parameter,
    signature_model,
    snake_case,
)

if TYPE_CHECKING:
    import pydantic

    from ..robot import Robot

__all__ = ["Handler", "Tool", "call_in_thread_or_await"]

logger = logging.getLogger("robotlab")

Handler = Callable[..., Any]


async def call_in_thread_or_await(fn: Callable[..., Any], *args: object, **kwargs: object) -> Any:
    """Call ``fn``: awaited when it is ``async``, else in a worker thread (an awaitable it returns is awaited)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


class Tool:
    """Base class of every tool.

    Subclass it and implement :meth:`execute`; its keyword parameters and their type hints
    become the JSON schema the model sees, unless the class sets ``parameters`` itself::

        class GetWeather(robotlab.Tool):
            description = "Current weather for a location."

            def execute(self, location: str) -> dict:
                return {"location": location, "temp_c": 21}

    An ``execute`` whose first parameter (after ``self``) is annotated :class:`~robotlab.RunContext`
    receives the run's context there; that parameter is not in the schema.

    ``name`` defaults to the class name in snake_case (``get_weather``). Set
    ``raise_on_error = True`` on a class to let exceptions propagate instead of being
    returned to the model; like RobotLab's flag it is not inherited by subclasses.

    Set ``side_effect = True`` on a tool whose calls change something outside the run (send a mail, write a
    row): robotlab only records it; a host that keeps an effect journal (the Django app) reads it.
    Set ``approve = True`` on a tool whose calls a person should approve first: each call then asks the
    robot's ``approver`` before it runs (:mod:`robotlab.tools.approval`; a robot without one runs it as any other),
    and :meth:`approval_details` says what the person is shown besides the arguments.
    """

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] | None = None
    raise_on_error: ClassVar[bool] = False
    mcp: str | None = None
    #: Whether a call changes something outside the run (recorded here; acted on by hosts, not by the core).
    side_effect: bool = False
    #: Whether a call waits for the robot's ``approver`` before it runs (:mod:`robotlab.tools.approval`).
    approve: bool = False

    _arguments_model: ClassVar[type[pydantic.BaseModel] | None] = None
    #: The name of the parameter that receives the :class:`~robotlab.RunContext`, ``None`` when none does.
    _context_parameter: str | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "raise_on_error" not in cls.__dict__:
            cls.raise_on_error = False
        if not cls.__dict__.get("name"):
            cls.name = snake_case(cls.__name__)
        if "execute" in cls.__dict__:
            cls._context_parameter = run_context_parameter(cls.__dict__["execute"], cls.name)
        if "execute" in cls.__dict__ and cls.__dict__.get("parameters") is None:
            summary, descriptions = docstring_parts(cls.__dict__["execute"].__doc__)
            cls._arguments_model = signature_model(cls.__dict__["execute"], cls.name, descriptions)
            if not cls.__dict__.get("description"):
                cls.description = summary or inspect.cleandoc(cls.__doc__ or "")

    def __init__(self, *, robot: Robot | None = None) -> None:
        self.robot = robot

    # -- what the model sees -------------------------------------------------------------
    @property
    def params_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments."""
        if self.parameters is not None:
            return clean_schema(dict(self.parameters))
        if self._arguments_model is not None:
            return model_schema(self._arguments_model)
        return {"type": "object", "properties": {}}

    def to_json_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI function-calling format that litellm sends to every provider.

        Computed once per name, description and parameters, since robots send it on every request.
        """
        key = (self.name, self.description, id(self.parameters))
        cached = self.__dict__.get("_json_schema")
        if cached is None or cached[0] != key:
            schema = {
                "type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.params_schema},
            }
            cached = (key, schema)
            self.__dict__["_json_schema"] = cached
        return cached[1]

    @property
    def is_mcp(self) -> bool:
        """Whether the tool was discovered on an MCP server."""
        return self.mcp is not None

    def to_dict(self) -> dict[str, Any]:
        """``name``, ``description`` and ``mcp``, unset values omitted."""
        data = {"name": self.name, "description": self.description or None, "mcp": self.mcp}
        return {k: v for k, v in data.items() if v is not None}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- running -------------------------------------------------------------------------
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Do the tool's work. Override in subclasses; may be ``async def``."""
        raise NotImplementedError(f"{type(self).__name__}.execute is not implemented")

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check the model's arguments against the schema and return the keyword arguments to pass.

        Raises :class:`ToolError` with a message the model can act on.
        """
        if not isinstance(arguments, Mapping):
            raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
        if self._arguments_model is not None and self.parameters is None:
            import pydantic  # loaded with the first arguments model, not at import

            try:
                model = self._arguments_model.model_validate(dict(arguments))
            except pydantic.ValidationError as exc:
                raise ToolError(format_validation_error(exc)) from None
            return {name: getattr(model, name) for name in type(model).model_fields}
        schema = self.params_schema
        missing = [key for key in schema.get("required", []) if key not in arguments]
        if missing:
            raise ToolError("invalid arguments: missing required " + ", ".join(missing))
        return dict(arguments)

    def _context_args(self) -> tuple[RunContext[Any], ...]:
        """``(the run's context,)`` for a tool that takes one, else ``()``."""
        if self._context_parameter is None:
            return ()
        context = current_run_context()
        if context is None:
            raise ToolError("this tool takes a RunContext: call it in a robot's run, or pass run_context= "
                            "to acall()/call()")
        return (context,)

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        return await call_in_thread_or_await(self.execute, *self._context_args(), **kwargs)

    async def approval_details(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What an approver is shown about a call besides ``arguments`` (the model's, valid): nothing by default.

        A tool on rows returns ``{"changes": [{"field", "before", "after"}, ...]}``. Raise
        :class:`~robotlab.errors.ToolError` to refuse a call that would fail anyway: the model reads the error and
        nobody is asked.
        """
        return {}

    async def _screen(self, arguments: Mapping[str, Any]) -> str | None:
        """The approver's denial of this call, ``None`` when it may run (:func:`robotlab.tools.approval.screen`)."""
        from .approval import screen  # it imports the ask and parking modules, which import this one

        return await screen(self, arguments)

    def error_text(self, error: BaseException) -> str:
        """The text returned to the model when the tool fails."""
        text = f"Error ({self.name}): {error}"
        if isinstance(error, ToolError) and error.retryable:
            text += " (retryable)"
        return text

    async def acall(self, arguments: Mapping[str, Any] | str | None = None, *,
                    run_context: RunContext[Any] | None = None) -> Any:
        """Validate ``arguments`` (a dict or the model's JSON text) and run the tool.

        A failure is returned as ``"Error (<name>): <message>"`` unless the class sets
        ``raise_on_error``. The call runs inside the ``tool_call`` hook family (the registries of the
        run in progress, else the global ones and the robot's) and returns ``ctx.tool_result``.
        A tool that takes a :class:`~robotlab.RunContext` gets ``run_context`` when given, else the run's.
        """
        if run_context is not None:
            with running(run_context):
                return await self.acall(arguments)
        parsed: Any = {} if arguments is None or arguments == "" else arguments
        invalid: ToolError | None = None
        if isinstance(parsed, str):
            try:
                parsed = json.loads(parsed)
            except json.JSONDecodeError as exc:
                invalid = ToolError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})")
        context = hooks.ToolCallHookContext(tool=self, tool_args=parsed, robot=self.robot)

        async def execute() -> None:
            try:
                if invalid is not None:
                    raise invalid
                arguments = self.validate_arguments(parsed)
                denied = await self._screen(parsed) if self.approve else None
                context.tool_result = denied if denied is not None else await self._invoke(arguments)
            except ToolError as exc:
                context.tool_error = exc
                if type(self).raise_on_error:
                    raise
                context.tool_result = self.error_text(exc)
            except Exception as exc:
                context.tool_error = exc
                if type(self).raise_on_error:
                    raise
                logger.warning("Tool '%s' error: %s: %s", self.name, type(exc).__name__, exc)
                context.tool_result = self.error_text(exc)

        scope = hooks.current_hook_scope()
        if scope is None:
            scope = hooks.HookScope((hooks.get_hooks(), getattr(self.robot, "hooks", None)), ())
        await hooks.run("tool_call", context, execute, registries=scope.registries, per_run_hooks=scope.per_run_hooks)
        if context.tool_error is not None:
            telemetry.tool_failed(context.tool_error)
        return context.tool_result

    def call(self, arguments: Mapping[str, Any] | str | None = None, *,
             run_context: RunContext[Any] | None = None) -> Any:
        """Synchronous :meth:`acall`."""
        from ..runtime import run_sync

        return run_sync(self.acall(arguments, run_context=run_context))

    # -- building ------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        *,
        name: str,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        handler: Handler | None = None,
        mcp: str | None = None,
        robot: Robot | None = None,
    ) -> Tool:
        """Build a tool from a name, a JSON schema and a handler that receives the arguments dict.

        ``parameters`` is a JSON schema object (``{"type": "object", "properties": {...},
        "required": [...]}``); a bare mapping of properties is accepted too.
        """
        schema: dict[str, Any] = dict(parameters or {})
        if schema and "properties" not in schema and schema.get("type") != "object":
            schema = {"type": "object", "properties": schema}
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return _CreatedTool(
            name=name, description=description or "", parameters=schema, handler=handler, mcp=mcp, robot=robot
        )


class _CreatedTool(Tool):
    """A tool made by :meth:`Tool.create`."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        handler: Handler | None,
        mcp: str | None,
        robot: Robot | None,
    ) -> None:
        super().__init__(robot=robot)
        self.name = name
        self.description = description
        self.parameters = parameters
        self.mcp = mcp
        self._handler = handler

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        if self._handler is None:
            raise ToolError("tool has no handler")
        return await call_in_thread_or_await(self._handler, kwargs)
