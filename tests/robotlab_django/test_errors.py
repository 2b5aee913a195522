from __future__ import annotations

import pickle

import pytest

import robotlab
from robotlab_django.registry import RobotAlreadyRegistered, UnknownNetworkError, UnknownRobotError
from robotlab_django.runs.jobs import RobotNotSpecifiedError
from robotlab_django.scaffolding.naming import InvalidNameError
from robotlab_django.scaffolding.render import ScaffoldError
from robotlab_django.services import NothingToRerunError, RunFailedError


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (InvalidNameError, ValueError),
        (RobotNotSpecifiedError, ValueError),
        (ScaffoldError, Exception),
        (RunFailedError, RuntimeError),
        (NothingToRerunError, ValueError),
        (UnknownRobotError, LookupError),
        (UnknownNetworkError, UnknownRobotError),
        (RobotAlreadyRegistered, ValueError),
    ],
)
def test_app_errors_join_the_tree_and_keep_their_builtin_base(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, robotlab.RobotLabError) and issubclass(error, builtin)


def test_an_app_error_is_caught_both_ways_with_its_message_and_context() -> None:
    with pytest.raises(robotlab.RobotLabError) as info:
        raise InvalidNameError("The robot name is empty.")
    assert isinstance(info.value, ValueError) and str(info.value) == "The robot name is empty."
    assert info.value.robot_name is None
    error = UnknownRobotError("nope", ["support"])
    assert isinstance(error, LookupError) and error.name == "nope" and error.robot_name is None
    assert str(RobotNotSpecifiedError()).startswith("No robot specified.")
    assert str(pickle.loads(pickle.dumps(NothingToRerunError("x")))) == "x"
