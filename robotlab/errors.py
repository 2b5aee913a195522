"""The RobotLab error tree, whose errors carry context.

Every exception raised on purpose by ``robotlab`` (and by the Django app ``robotlab_django``)
derives from :class:`RobotLabError`, so one ``except robotlab.RobotLabError`` catches them all::

    RobotLabError                 robot_name, network_name, task_name
    +-- ConfigurationError        invalid or missing configuration (a developer mistake); setting
    |   +-- DependencyError       an optional dependency is missing; package
    +-- InferenceError            the LLM call failed, or a run was stopped by a limit; model, provider,
    |   |                         status_code, retry_after, kind
    |   +-- ToolLoopError         more tool calls than ``max_tool_rounds``; limit, usage
    |   +-- BudgetExceeded        a budget stop, or a reservation past its limit; dimension, limit, usage
    +-- ToolNotFoundError         a tool name that is not registered; tool_name, available
    +-- MCPError                  an MCP server could not be reached or answered with an error; server_name, retryable
    +-- BusError                  message-bus communication failed; channel
    +-- ToolError                 a tool failed; tool_name, retryable
    +-- AwaitTimeout              ``memory.get(key, wait=...)`` timed out; key, timeout
    +-- DelegationTimeout         ``DelegationFuture.value(timeout=...)`` timed out; timeout
    +-- AttachmentError           a run attachment cannot be sent (also a ``ValueError``); attachment

The message is the seed's wording; the context is given as keyword-only constructor arguments,
every one optional, and read back as attributes (``None`` when the raiser did not know it)::

    try:
        robot.run("...")
    except robotlab.ToolLoopError as exc:
        print(exc.robot_name, exc.limit, exc.usage)

Where-context (``robot_name``, ``network_name``, ``task_name``) is accepted by every class.

A model provider's failure is an :class:`InferenceError` whose ``kind`` (:data:`ProviderErrorKind`) says
what went wrong: words for end users come from it, never from the error's text.
"""

from __future__ import annotations

from typing import Literal, TypedDict, Unpack, get_args

__all__ = [
    "PROVIDER_ERROR_KINDS",
    "RETRYABLE_CLASSES",
    "AttachmentError",
    "AwaitTimeout",
    "BudgetExceeded",
    "BusError",
    "ConfigurationError",
    "DelegationTimeout",
    "DependencyError",
    "InferenceError",
    "MCPError",
    "ProviderErrorKind",
    "RobotLabError",
    "ToolError",
    "ToolLoopError",
    "ToolNotFoundError",
    "Where",
    "is_retryable",
    "retryable_classes",
]


class Where(TypedDict, total=False):
    """Where an error happened: the keyword arguments every :class:`RobotLabError` accepts.

    Subclasses pass them on to :class:`RobotLabError`, whose constructor names them, so a
    misspelt one is a ``TypeError``.
    """

    robot_name: str | None
    network_name: str | None
    task_name: str | None


class RobotLabError(Exception):
    """Base class of every RobotLab error (Ruby ``RobotLab::Error``).

    Args:
        *args: the message (the exception's ``args``, as for any ``Exception``).
        robot_name: the robot the error happened in.
        network_name: the network the error happened in.
        task_name: the network task the error happened in.
    """

    robot_name: str | None = None
    network_name: str | None = None
    task_name: str | None = None

    def __init__(
        self,
        *args: object,
        robot_name: str | None = None,
        network_name: str | None = None,
        task_name: str | None = None,
    ) -> None:
        super().__init__(*args)
        self.robot_name = robot_name
        self.network_name = network_name
        self.task_name = task_name


# -- configuration -------------------------------------------------------------------------------


class ConfigurationError(RobotLabError):
    """Configuration is invalid or a required value is missing.

    Args:
        setting: the setting or option at fault (``"model"``, ``"max_tool_rounds"``).
    """

    setting: str | None = None

    def __init__(self, *args: object, setting: str | None = None, **where: Unpack[Where]) -> None:
        super().__init__(*args, **where)
        self.setting = setting


class DependencyError(ConfigurationError):
    """An optional dependency needed by a feature is not installed.

    Args:
        package: the package to install (``"redis"``, ``"sentence-transformers"``).
    """

    package: str | None = None

    def __init__(
        self, *args: object, package: str | None = None, setting: str | None = None, **where: Unpack[Where]
    ) -> None:
        super().__init__(*args, setting=setting, **where)
        self.package = package


# -- inference -----------------------------------------------------------------------------------


ProviderErrorKind = Literal["auth", "permission", "not_found", "bad_request", "context_window", "content_policy",
                            "quota", "rate_limit", "timeout", "server", "cut_stream", "connection", "configuration",
                            "unknown"]
"""What kind of model provider failure an :class:`InferenceError` is: ``auth`` (401), ``permission`` (403),
``not_found`` (404), ``bad_request`` (400, 422), ``quota`` (402), ``rate_limit`` (429), ``timeout`` (408), ``server``
(5xx), ``cut_stream`` (the stream ended early), ``connection`` (no server reached), ``configuration`` (a provider
litellm does not know), ``context_window``, ``content_policy``, or ``unknown``."""

PROVIDER_ERROR_KINDS: tuple[ProviderErrorKind, ...] = get_args(ProviderErrorKind)
"""Every :data:`ProviderErrorKind`, in its order."""


class InferenceError(RobotLabError):
    """The LLM call failed, or the run was stopped by a budget.

    A provider's failure (raised by the transports, :mod:`robotlab.llm.guard`) sets ``kind``; a run stopped
    by a limit (:class:`ToolLoopError`, :class:`BudgetExceeded`) or an error raised by other code leaves it
    ``None``.

    Args:
        model: the model that was called.
        provider: the provider that answered (litellm's name: ``"openai"``, ``"anthropic"``), when known.
        status_code: the HTTP status of the provider's answer (``429``), when there was one.
        retry_after: the seconds the provider asked to wait before trying again (its ``Retry-After``).
        kind: what kind of provider failure it is (:data:`ProviderErrorKind`).
    """

    model: str | None = None
    provider: str | None = None
    status_code: int | None = None
    retry_after: float | None = None
    kind: ProviderErrorKind | None = None

    def __init__(self, *args: object, model: str | None = None, provider: str | None = None,
                 status_code: int | None = None, retry_after: float | None = None,
                 kind: ProviderErrorKind | None = None, **where: Unpack[Where]) -> None:
        super().__init__(*args, **where)
        self.model = model
        self.provider = provider
        self.status_code = status_code
        self.retry_after = retry_after
        self.kind = kind


class ToolLoopError(InferenceError):
    """A run made more tool calls than its ``max_tool_rounds`` allows.

    Args:
        limit: the run's ``max_tool_rounds``.
        usage: the tool calls made, the one that tripped the breaker included (``limit + 1``).
    """

    limit: int | None = None
    usage: int | None = None

    def __init__(
        self,
        *args: object,
        limit: int | None = None,
        usage: int | None = None,
        model: str | None = None,
        **where: Unpack[Where],
    ) -> None:
        super().__init__(*args, model=model, **where)
        self.limit = limit
        self.usage = usage


# -- tools ---------------------------------------------------------------------------------------


class ToolNotFoundError(RobotLabError):
    """A tool was looked up by a name that is not registered.

    Args:
        tool_name: the name that was looked up.
        available: the names that are registered.
    """

    tool_name: str | None = None
    available: tuple[str, ...] = ()

    def __init__(
        self,
        *args: object,
        tool_name: str | None = None,
        available: tuple[str, ...] | list[str] = (),
        **where: Unpack[Where],
    ) -> None:
        super().__init__(*args, **where)
        self.tool_name = tool_name
        self.available = tuple(available)


class ToolError(RobotLabError):
    """A tool failed. Raise it from a tool to control the text the model sees.

    Args:
        tool_name: the tool that failed.
        retryable: whether calling the tool again may succeed (see :func:`is_retryable`).
    """

    tool_name: str | None = None
    retryable: bool = False

    def __init__(
        self, *args: object, retryable: bool = False, tool_name: str | None = None, **where: Unpack[Where]
    ) -> None:
        super().__init__(*args, **where)
        self.retryable = retryable
        self.tool_name = tool_name


# -- connections ---------------------------------------------------------------------------------


class MCPError(RobotLabError):
    """An MCP server could not be reached, or it answered with an error.

    Args:
        server_name: the MCP server's configured name.
        retryable: whether trying again may succeed (a lost connection, a timeout).
    """

    server_name: str | None = None
    retryable: bool = False

    def __init__(
        self, *args: object, retryable: bool = False, server_name: str | None = None, **where: Unpack[Where]
    ) -> None:
        super().__init__(*args, **where)
        self.retryable = retryable
        self.server_name = server_name


class BusError(RobotLabError):
    """Message-bus communication failed (no bus configured, a handler raised).

    Args:
        channel: the bus channel (a robot's name) involved.
    """

    channel: str | None = None

    def __init__(self, *args: object, channel: str | None = None, **where: Unpack[Where]) -> None:
        super().__init__(*args, **where)
        self.channel = channel


# -- limits and waits ----------------------------------------------------------------------------


class BudgetExceeded(InferenceError):
    """A run went past a budget.

    That is a robot's ``token_budget`` / ``cost_budget``, or a :class:`~robotlab.budget.Ledger` reservation
    that would take a dimension past its limit.

    An :class:`InferenceError`, so ``except InferenceError`` still catches a budget stop; never
    retryable.

    Args:
        dimension: the budget's dimension (``"tokens"`` or ``"cost"``).
        limit: the budget that was passed.
        usage: what was used (or would have been committed), in the budget's unit.

    ``scope`` names a shared budget that stopped the run (``"network 'support'"``), ``None`` for a
    robot's own budget.
    """

    dimension: str | None = None
    limit: float | None = None
    usage: float | None = None
    scope: str | None = None

    def __init__(
        self,
        *args: object,
        dimension: str | None = None,
        limit: float | None = None,
        usage: float | None = None,
        model: str | None = None,
        **where: Unpack[Where],
    ) -> None:
        super().__init__(*args, model=model, **where)
        self.dimension = dimension
        self.limit = limit
        self.usage = usage


class AwaitTimeout(RobotLabError):
    """A blocking memory read timed out waiting for a key.

    Args:
        key: the memory key that did not appear.
        timeout: the seconds waited for it.
    """

    key: str | None = None
    timeout: float | None = None

    def __init__(
        self, *args: object, key: str | None = None, timeout: float | None = None, **where: Unpack[Where]
    ) -> None:
        super().__init__(*args, **where)
        self.key = key
        self.timeout = timeout


class AttachmentError(RobotLabError, ValueError):
    """A run attachment cannot be sent: a missing file, an unknown MIME type, or a kind models do not take.

    Args:
        attachment: what names the attachment at fault (its path, URL, or file name).
    """

    attachment: str | None = None

    def __init__(self, *args: object, attachment: str | None = None, **where: Unpack[Where]) -> None:
        super().__init__(*args, **where)
        self.attachment = attachment


class DelegationTimeout(RobotLabError):
    """Waiting on a :class:`~robotlab.DelegationFuture` timed out.

    Args:
        timeout: the seconds waited. ``robot_name`` is the robot delegated to.
    """

    timeout: float | None = None

    def __init__(self, *args: object, timeout: float | None = None, **where: Unpack[Where]) -> None:
        super().__init__(*args, **where)
        self.timeout = timeout


# -- retrying ------------------------------------------------------------------------------------


RETRYABLE_CLASSES: tuple[type[RobotLabError], ...] = (InferenceError,)
"""The error classes that are retryable by their type alone (immutable, as RobotLab's frozen list)."""


def retryable_classes() -> tuple[type[RobotLabError], ...]:
    """The error classes that are retryable by their type alone: :data:`RETRYABLE_CLASSES`."""
    return RETRYABLE_CLASSES


def is_retryable(error: BaseException | None) -> bool:
    """Whether trying the failed operation again may succeed (Ruby ``Errors.retryable?``)."""
    if error is None or isinstance(error, ToolLoopError | BudgetExceeded):
        return False
    if isinstance(error, MCPError | ToolError):
        return error.retryable is True
    return isinstance(error, InferenceError)
