"""Hooks: handler classes that run before, around and after what robots and networks do.

A hook handler is a subclass of :class:`Hook` whose hook methods are class methods named after a
hook: ``before_run``, ``around_tool_call``, ``on_error``... (``@classmethod`` is optional: a plain
method with one of those names is made a class method). Register it globally with
:func:`robotlab.on`, on a network or robot with ``.on(...)``, or for one call with
``robot.run(..., hooks=[...])``::

    class Timer(robotlab.Hook):
        def before_run(cls, ctx):
            ctx.local.started = time.monotonic()

        def after_run(cls, ctx):
            print(ctx.robot.name, time.monotonic() - ctx.local.started)

    robotlab.on(Timer)

There are seven families (:data:`FAMILIES`), each with ``before_<family>``, ``around_<family>`` and
``after_<family>``; ``run``, ``network_run`` and ``task`` also have ``on_error``, and
``compaction`` and ``learn`` have the point hooks ``on_compaction`` and ``on_learn``.

Hook methods may be ``async def``. An around hook receives ``proceed``, an async function that runs
the rest of the chain; it must ``return await proceed()`` (or a value of its own to short-circuit).
Registrations run global, then network, then robot, then per-run, and the first registered around
hook is the outermost. :func:`run` fires ``on_error`` and re-raises: hooks never swallow an error.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from .hook_contexts import (
    CompactionHookContext,
    DotState,
    ExtensionState,
    HookContext,
    LearnHookContext,
    LlmGenerationHookContext,
    NetworkRunHookContext,
    RunHookContext,
    TaskHookContext,
    ToolCallHookContext,
)

__all__ = ["ERROR_FAMILIES", "FAMILIES", "HOOK_NAMES", "POINT_HOOKS", "CompactionHookContext", "DotState",
           "ExtensionState", "Hook", "HookContext", "HookRegistry", "HookScope", "LearnHookContext",
           "LlmGenerationHookContext", "NetworkRunHookContext", "Proceed", "Registration",
           "RunHookContext", "TaskHookContext", "ToolCallHookContext", "around", "call", "call_all",
           "call_around", "call_registration", "clear_hooks", "current_hook_scope", "error_registrations",
           "get_hooks", "normalize_hooks", "on", "per_run_entries", "registrations", "run", "scope_for",
           "set_result", "with_hook_scope", "without_global_hooks"]

#: The hook families, in the order a robot inside a network meets them.
FAMILIES = ("network_run", "task", "run", "llm_generation", "compaction", "tool_call", "learn")
#: The families that fire ``on_error`` when their work raises.
ERROR_FAMILIES = ("run", "network_run", "task")
#: The point hook fired inside the core work of a family.
POINT_HOOKS = {"compaction": "on_compaction", "learn": "on_learn"}
#: Every hook name the core fires.
HOOK_NAMES = frozenset(
    [f"{phase}_{family}" for family in FAMILIES for phase in ("before", "around", "after")]
    + ["on_error", *POINT_HOOKS.values()]
)

Proceed = Callable[[], Awaitable[Any]]


async def _resolve(value: object) -> Any:
    return await value if inspect.isawaitable(value) else value


# -- handlers and registries -----------------------------------------------------------------------
def _snake_case(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()


class Hook:
    """Base class of hook handlers; hook methods are class methods (see the module's docs).

    ``namespace`` names the handler's ``ctx.local`` state. It defaults to the class name in
    snake_case (``TokenLogger`` -> ``"token_logger"``); set ``namespace = "..."`` in the class body
    to choose another. Each subclass derives its own: a parent's namespace is not inherited.
    """

    namespace: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "namespace" not in cls.__dict__:
            cls.namespace = _snake_case(cls.__name__)
        for name in HOOK_NAMES:
            value = cls.__dict__.get(name)
            if inspect.isfunction(value):
                setattr(cls, name, classmethod(value))

    @classmethod
    def implements(cls, hook_name: str) -> bool:
        """Whether this handler defines the hook ``hook_name``."""
        return (
            not hook_name.startswith("_") and not hasattr(Hook, hook_name) and callable(getattr(cls, hook_name, None))
        )

    @classmethod
    async def call(cls, hook_name: str, context: HookContext, proceed: Proceed | None = None) -> Any:
        """Call hook ``hook_name`` (with ``proceed`` for an around hook).

        A hook the handler does not define is a no-op, or for an around hook a pass-through to ``proceed``.
        """
        if cls.implements(hook_name):
            method = getattr(cls, hook_name)
            return await _resolve(method(context) if proceed is None else method(context, proceed))
        if proceed is not None:
            return await proceed()
        return None


def _check_handler(handler_class: object) -> type[Hook]:
    if not isinstance(handler_class, type) or not issubclass(handler_class, Hook) or handler_class is Hook:
        raise TypeError(f"{handler_class!r} must be a robotlab.Hook subclass")
    return handler_class


@dataclass(frozen=True)
class Registration:
    """One registered handler, with the defaults it puts in ``ctx.local`` before each call."""

    handler_class: type[Hook]
    context: Mapping[str, Any] | None = None

    @property
    def namespace(self) -> str | None:
        """The handler's namespace."""
        return self.handler_class.namespace


class HookRegistry:
    """Registered hook handlers: the global one (:func:`get_hooks`), a network's, a robot's."""

    def __init__(self) -> None:
        self._registrations: list[Registration] = []

    def on(self, handler_class: type[Hook], *, context: Mapping[str, Any] | None = None) -> Registration:
        """Register ``handler_class``; ``context`` gives defaults for its ``ctx.local`` values."""
        handler = _check_handler(handler_class)
        if handler.namespace is None:
            raise ValueError(f"{handler.__name__} has no namespace")
        registration = Registration(handler, context)
        self._registrations.append(registration)
        return registration

    def registrations_for(self, hook_name: str) -> list[Registration]:
        """The registrations whose handler defines ``hook_name``."""
        return [r for r in self._registrations if r.handler_class.implements(hook_name)]

    @property
    def registrations(self) -> list[Registration]:
        """Every registration, in order (a copy)."""
        return list(self._registrations)

    def clear(self) -> HookRegistry:
        """Remove every registration."""
        self._registrations.clear()
        return self

    def __len__(self) -> int:
        return len(self._registrations)

    def __repr__(self) -> str:
        return f"<HookRegistry {[r.handler_class.__name__ for r in self._registrations]}>"


_global_hooks = HookRegistry()


def get_hooks() -> HookRegistry:
    """The global hook registry (every robot and network consults it)."""
    return _global_hooks


def on(handler_class: type[Hook], *, context: Mapping[str, Any] | None = None) -> Registration:
    """Register ``handler_class`` globally (see :meth:`HookRegistry.on`)."""
    return _global_hooks.on(handler_class, context=context)


def clear_hooks() -> HookRegistry:
    """Replace the global registry with an empty one and return it."""
    global _global_hooks
    _global_hooks = HookRegistry()
    return _global_hooks


def normalize_hooks(hooks: object) -> tuple[type[Hook], ...]:
    """Per-run hooks (``None``, a :class:`Hook` subclass, or several) as a tuple of handlers."""
    if hooks is None:
        return ()
    if isinstance(hooks, type):
        return (_check_handler(hooks),)
    if isinstance(hooks, Iterable) and not isinstance(hooks, str | bytes | Mapping):
        return tuple(_check_handler(h) for h in hooks)
    raise TypeError(f"{hooks!r} must be a robotlab.Hook subclass")


# -- the scope of a run --------------------------------------------------------------------------
class HookScope(NamedTuple):
    """The registries and per-run hooks of the run in progress (what tool calls consult)."""

    registries: tuple[HookRegistry | None, ...]
    per_run_hooks: tuple[type[Hook], ...]


_scope: contextvars.ContextVar[HookScope | None] = contextvars.ContextVar("robotlab_hook_scope", default=None)
_without_global: contextvars.ContextVar[bool] = contextvars.ContextVar("robotlab_without_global_hooks", default=False)


@contextlib.contextmanager
def without_global_hooks() -> Iterator[None]:
    """Call no handler of the global registry in the block, and in the tasks it starts (:func:`registrations`).

    For a run that is not the application's own, such as a worker's rehearsal at start
    (:func:`robotlab.robot.rehearsal.rehearse`): the application's global hooks do not see it. Network, robot and
    per-run hooks still run.
    """
    token = _without_global.set(True)
    try:
        yield
    finally:
        _without_global.reset(token)


@contextlib.contextmanager
def with_hook_scope(registries: Sequence[HookRegistry | None], per_run_hooks: object = None) -> Iterator[HookScope]:
    """Make ``registries`` and ``per_run_hooks`` the current scope for the block.

    The scope holds for every task the block starts, and the previous scope comes back after it.
    """
    scope = HookScope(tuple(registries), normalize_hooks(per_run_hooks))
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def current_hook_scope() -> HookScope | None:
    """The scope set by the innermost :func:`with_hook_scope`, else ``None``."""
    return _scope.get()


def scope_for(registry: HookRegistry) -> HookScope:
    """The hook scope that applies to ``registry`` (a robot's).

    That is the scope of the run in progress when it consults ``registry``, else the global registry and
    ``registry``.
    """
    scope = _scope.get()
    if scope is not None and any(found is registry for found in scope.registries):
        return scope
    return HookScope((_global_hooks, registry), ())


# -- dispatch ------------------------------------------------------------------------------------
def per_run_entries(hook_name: str, hooks: object) -> list[Registration]:
    """Registrations for the per-run handlers that define ``hook_name``."""
    return [Registration(h) for h in normalize_hooks(hooks) if h.implements(hook_name)]


def registrations(
    hook_name: str, registries: Sequence[HookRegistry | None], per_run_hooks: object = None
) -> list[Registration]:
    """Every registration for ``hook_name``: each registry's in order, then the per-run handlers.

    Inside :func:`without_global_hooks` the global registry's are left out.
    """
    skipped = _global_hooks if _without_global.get() else None
    found = [r for reg in registries if reg is not None and reg is not skipped
             for r in reg.registrations_for(hook_name)]
    return found + per_run_entries(hook_name, per_run_hooks)


def error_registrations(
    family: str, registries: Sequence[HookRegistry | None], per_run_hooks: object = None
) -> list[Registration]:
    """The ``on_error`` registrations, for the families in :data:`ERROR_FAMILIES` only."""
    if family not in ERROR_FAMILIES:
        return []
    return registrations("on_error", registries, per_run_hooks)


async def call_registration(
    registration: Registration, hook_name: str, context: HookContext, proceed: Proceed | None = None
) -> Any:
    """Call one registration with its namespace active and its defaults merged into ``ctx.local``."""
    namespace = registration.namespace
    with context.with_namespace(namespace):
        if registration.context is not None and namespace is not None:
            context.ext(namespace).merge_defaults(registration.context)
        return await registration.handler_class.call(hook_name, context, proceed)


async def call_all(found: Sequence[Registration], hook_name: str, context: HookContext) -> None:
    """Call each registration in order."""
    for registration in found:
        await call_registration(registration, hook_name, context)


async def call_around(
    found: Sequence[Registration], hook_name: str, context: HookContext, block: Callable[[], Any]
) -> Any:
    """Nest ``block`` in the around registrations (the first outermost) and return the chain's value."""

    async def chain() -> Any:
        return await _resolve(block())

    for registration in reversed(found):

        def link(registration: Registration = registration, inner: Proceed = chain) -> Awaitable[Any]:
            return call_registration(registration, hook_name, context, inner)

        chain = link  # type: ignore[assignment]
    return await chain()


def set_result(context: HookContext, family: str, result: object) -> None:
    """Put a family's result on its context.

    ``response`` (run), ``result`` (network_run, task) or ``generation_response`` (llm_generation).
    """
    attribute = {"run": "response", "network_run": "result", "task": "result"}.get(family)
    if family == "llm_generation":
        attribute = "generation_response"
    if attribute is not None and hasattr(context, attribute):
        setattr(context, attribute, result)


async def run(
    family: str,
    context: HookContext,
    block: Callable[[], Any],
    *,
    registries: Sequence[HookRegistry | None],
    per_run_hooks: object = None,
) -> Any:
    """Run ``block`` (a function, sync or async) inside hook family ``family``.

    ``before_*`` hooks, the ``around_*`` chain, :func:`set_result`, ``after_*`` hooks. On any exception the
    context's ``error`` is set, ``on_error`` fires (run, network_run, task) and the exception propagates.
    """
    try:
        before, around_, after = (f"before_{family}", f"around_{family}", f"after_{family}")
        await call_all(registrations(before, registries, per_run_hooks), before, context)
        result = await call_around(registrations(around_, registries, per_run_hooks), around_, context, block)
        set_result(context, family, result)
        await call_all(registrations(after, registries, per_run_hooks), after, context)
        return result
    except BaseException as exc:
        if hasattr(context, "error"):
            context.error = exc
        await call_all(error_registrations(family, registries, per_run_hooks), "on_error", context)
        raise


async def call(
    hook_name: str,
    context: HookContext,
    *,
    registries: Sequence[HookRegistry | None],
    per_run_hooks: object = None,
) -> None:
    """Fire one hook (such as the point hooks ``on_compaction`` and ``on_learn``) on every registration."""
    await call_all(registrations(hook_name, registries, per_run_hooks), hook_name, context)


async def around(
    hook_name: str,
    context: HookContext,
    block: Callable[[], Any],
    *,
    registries: Sequence[HookRegistry | None],
    per_run_hooks: object = None,
) -> Any:
    """Run ``block`` inside the around chain of ``hook_name`` only."""
    return await call_around(registrations(hook_name, registries, per_run_hooks), hook_name, context, block)
