from __future__ import annotations

import pytest

import robotlab
import robotlab.errors as errors


def test_tree() -> None:
    assert issubclass(errors.RobotLabError, Exception)
    assert issubclass(errors.DependencyError, errors.ConfigurationError)
    assert issubclass(errors.ToolLoopError, errors.InferenceError)
    assert issubclass(errors.BudgetExceeded, errors.InferenceError)  # a budget stop (issue 16)
    for name in ("ConfigurationError", "InferenceError", "ToolNotFoundError", "MCPError", "BusError",
                 "ToolError", "BudgetExceeded", "AwaitTimeout", "DelegationTimeout"):
        assert issubclass(getattr(errors, name), errors.RobotLabError)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (None, False),
        (errors.ToolLoopError("x"), False),
        (errors.BudgetExceeded("x"), False),
        (errors.InferenceError("x"), True),
        (errors.MCPError("x"), False),
        (errors.MCPError("x", retryable=True), True),
        (errors.ToolError("x", retryable=True), True),
        (errors.ToolError("x"), False),
        (errors.ConfigurationError("x"), False),
        (ValueError("x"), False),
    ],
)
def test_is_retryable(error: BaseException | None, expected: bool) -> None:
    assert errors.is_retryable(error) is expected
    assert errors.retryable_classes() is errors.RETRYABLE_CLASSES == (errors.InferenceError,)
    assert isinstance(errors.RETRYABLE_CLASSES, tuple)  # immutable


def test_ractor_boundary_error_is_gone() -> None:
    """Exported but never raised: the one name removed from the public API (issue 16)."""
    assert not hasattr(errors, "RactorBoundaryError")
    assert "RactorBoundaryError" not in robotlab.__all__


@pytest.mark.parametrize(
    ("error", "context"),
    [
        (errors.RobotLabError("m", robot_name="r", network_name="n", task_name="t"),
         {"robot_name": "r", "network_name": "n", "task_name": "t"}),
        (errors.ConfigurationError("m", setting="model"), {"setting": "model", "robot_name": None}),
        (errors.DependencyError("m", package="redis"), {"package": "redis", "setting": None}),
        (errors.InferenceError("m", model="openai/x", robot_name="r"), {"model": "openai/x", "robot_name": "r"}),
        (errors.ToolLoopError("m", limit=3, usage=4, robot_name="r"), {"limit": 3, "usage": 4, "robot_name": "r"}),
        (errors.ToolNotFoundError("m", tool_name="x", available=["a", "b"]),
         {"tool_name": "x", "available": ("a", "b")}),
        (errors.ToolError("m", tool_name="t", retryable=True), {"tool_name": "t", "retryable": True}),
        (errors.MCPError("m", server_name="fs", retryable=True), {"server_name": "fs", "retryable": True}),
        (errors.BusError("m", channel="bob", robot_name="alice"), {"channel": "bob", "robot_name": "alice"}),
        (errors.BudgetExceeded("m", dimension="tokens", limit=10, usage=12),
         {"dimension": "tokens", "limit": 10, "usage": 12}),
        (errors.AwaitTimeout("m", key="k", timeout=0.5), {"key": "k", "timeout": 0.5}),
        (errors.DelegationTimeout("m", robot_name="w", timeout=2), {"robot_name": "w", "timeout": 2}),
    ],
)
def test_errors_carry_context_and_keep_their_message(error: errors.RobotLabError, context: dict[str, object]) -> None:
    assert str(error) == "m" and error.args == ("m",)
    assert {name: getattr(error, name) for name in context} == context


def test_context_defaults_to_none_and_args_are_kept() -> None:
    error = errors.ToolLoopError()
    assert (str(error), error.args, error.limit, error.usage, error.robot_name, error.model) == ("", (), None, None,
                                                                                                 None, None)
    assert errors.RobotLabError("a", "b").args == ("a", "b")
    with pytest.raises(TypeError):
        errors.BusError("m", tool_name="x")  # type: ignore[call-arg]


def test_context_survives_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(errors.MCPError("lost", server_name="fs", retryable=True, robot_name="r")))
    assert (type(error), str(error), error.server_name, error.retryable, error.robot_name) == (
        errors.MCPError, "lost", "fs", True, "r")
