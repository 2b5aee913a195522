"""The RobotLab error tree.

Every exception raised on purpose by ``robotlab`` derives from :class:`RobotLabError`,
so one ``except robotlab.RobotLabError`` catches them all::

    RobotLabError
    +-- ConfigurationError        invalid or missing configuration (a developer mistake)
    |   +-- DependencyError       an optional dependency is missing
    +-- InferenceError            the LLM call failed, or a run was stopped by a limit
    |   +-- ToolLoopError         more tool calls than ``max_tool_rounds``
    |   +-- BudgetExceeded        a budget stop, or a reservation that would exceed its limit
    +-- ToolNotFoundError         a tool name that is not registered
    +-- MCPError                  an MCP server could not be reached or answered with an error
    +-- BusError                  message-bus communication failed
    +-- RactorBoundaryError       kept for parity with RobotLab (values that cannot cross a worker boundary)
    +-- ToolError                 a tool failed; ``retryable`` says whether trying again may help
    +-- AwaitTimeout              ``memory.get(key, wait=...)`` timed out
    +-- DelegationTimeout         ``DelegationFuture.value(timeout=...)`` timed out
"""

from __future__ import annotations

__all__ = [
    "AwaitTimeout",
    "BudgetExceeded",
    "BusError",
    "ConfigurationError",
    "DelegationTimeout",
    "DependencyError",
    "InferenceError",
    "MCPError",
    "RactorBoundaryError",
    "RobotLabError",
    "ToolError",
    "ToolLoopError",
    "ToolNotFoundError",
    "is_retryable",
    "retryable_classes",
]


class RobotLabError(Exception):
    """Base class of every RobotLab error (Ruby ``RobotLab::Error``)."""


class ConfigurationError(RobotLabError):
    """Configuration is invalid or a required value is missing."""


class DependencyError(ConfigurationError):
    """An optional dependency needed by a feature is not installed."""


class InferenceError(RobotLabError):
    """The LLM call failed, or the run was stopped by a budget."""


class ToolLoopError(InferenceError):
    """A run made more tool calls than its ``max_tool_rounds`` allows."""


class ToolNotFoundError(RobotLabError):
    """A tool was looked up by a name that is not registered."""


class MCPError(RobotLabError):
    """An MCP server could not be reached, or it answered with an error."""

    def __init__(self, message: str = "", *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class BusError(RobotLabError):
    """Message-bus communication failed (no bus configured, a handler raised)."""


class RactorBoundaryError(RobotLabError):
    """A value could not be made shareable across a worker boundary."""


class ToolError(RobotLabError):
    """A tool failed. Raise it from a tool to control the text the model sees."""

    def __init__(self, message: str = "", *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class BudgetExceeded(InferenceError):
    """A run went past a robot's ``token_budget`` / ``cost_budget``, or a :class:`~robotlab.budget.Ledger`
    reservation would take a dimension past its limit.

    An :class:`InferenceError`, so ``except InferenceError`` still catches a budget stop; never retryable.

    Attributes:
        robot_name: The robot whose budget stopped the run (``None`` for a bare ledger).
        limit: The budget that was passed.
        usage: What was used (or would have been committed), in the budget's unit.
    """

    def __init__(self, message: str = "", *, robot_name: str | None = None, limit: float | None = None,
                 usage: float | None = None) -> None:
        super().__init__(message)
        self.robot_name = robot_name
        self.limit = limit
        self.usage = usage


class AwaitTimeout(RobotLabError):
    """A blocking memory read timed out waiting for a key."""


class DelegationTimeout(RobotLabError):
    """Waiting on a :class:`~robotlab.DelegationFuture` timed out."""


def retryable_classes() -> list[type[RobotLabError]]:
    """The error classes that are retryable by their type alone."""
    return [InferenceError]


def is_retryable(error: BaseException | None) -> bool:
    """Whether trying the failed operation again may succeed (Ruby ``Errors.retryable?``)."""
    if error is None or isinstance(error, ToolLoopError | BudgetExceeded):
        return False
    if isinstance(error, MCPError | ToolError):
        return error.retryable is True
    return isinstance(error, InferenceError)
