from __future__ import annotations

import pytest

import robotlab.errors as errors


def test_tree() -> None:
    assert issubclass(errors.RobotLabError, Exception)
    assert issubclass(errors.DependencyError, errors.ConfigurationError)
    assert issubclass(errors.ToolLoopError, errors.InferenceError)
    assert issubclass(errors.BudgetExceeded, errors.InferenceError)  # a budget stop is caught as before
    for name in ("ConfigurationError", "InferenceError", "ToolNotFoundError", "MCPError", "BusError",
                 "RactorBoundaryError", "ToolError", "BudgetExceeded", "AwaitTimeout", "DelegationTimeout"):
        assert issubclass(getattr(errors, name), errors.RobotLabError)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (None, False),
        (errors.ToolLoopError("x"), False),
        (errors.InferenceError("x"), True),
        (errors.BudgetExceeded("x"), False),
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
    assert errors.retryable_classes() == [errors.InferenceError]
