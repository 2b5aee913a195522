"""Name normalisation for robots, tools and apps (used by the registry and the scaffolding commands).

``Support``, ``support`` and ``SupportRobot`` all name the same robot: class ``SupportRobot``
in module ``support_robot``, robot name ``support``.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from robotlab.errors import RobotLabError

__all__ = ["InvalidNameError", "RobotName", "app_name", "robot_name", "snake_case", "tool_name"]

_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+")


class InvalidNameError(RobotLabError, ValueError):
    """A name that cannot become a Python identifier."""


def _check_identifier(raw: str, what: str) -> str:
    name = raw.strip()
    if not name:
        raise InvalidNameError(f"The {what} name is empty.")
    if not name.isascii() or not name.isidentifier():
        raise InvalidNameError(
            f"'{name}' is not a valid {what} name: use letters, digits and underscores, starting with a letter "
            "(for example Support or billing_helper)."
        )
    if name.startswith("_"):
        raise InvalidNameError(f"'{name}' is not a valid {what} name: it must not start with an underscore.")
    if keyword.iskeyword(name):
        raise InvalidNameError(f"'{name}' is not a valid {what} name: it is a Python keyword.")
    return name


def _words(name: str) -> list[str]:
    return [word.lower() for part in name.split("_") for word in _WORDS.findall(part)]


def snake_case(name: str) -> str:
    """``LookupOrder`` -> ``lookup_order``; ``HTTPClient`` -> ``http_client``."""
    return "_".join(_words(name))


@dataclass(frozen=True)
class RobotName:
    """The names derived from one robot name."""

    robot_name: str
    """The robot's name (``support``), given to ``robotlab.build(name=...)`` and the registry."""
    class_name: str
    """The generated factory class (``SupportRobot``)."""
    module: str
    """The module the class lives in (``support_robot``)."""
    title: str
    """For prose (``Support``; ``Billing Helper`` for ``billing_helper``)."""


def robot_name(raw: str) -> RobotName:
    """Normalise a robot name given on the command line or to the registry.

    Raises:
        InvalidNameError: ``raw`` is not an identifier, is a keyword, or is only ``Robot``.
    """
    name = _check_identifier(raw, "robot")
    words = _words(name)
    if len(words) > 1 and words[-1] == "robot":
        words = words[:-1]
    if words == ["robot"]:
        raise InvalidNameError("'Robot' alone is not a robot name: name what it does (for example Support).")
    snake = "_".join(words)
    return RobotName(
        robot_name=snake,
        class_name="".join(word.capitalize() for word in words) + "Robot",
        module=f"{snake}_robot",
        title=" ".join(word.capitalize() for word in words),
    )


def tool_name(raw: str) -> str:
    """A tool's function and module name in snake_case (``LookupOrder`` -> ``lookup_order``).

    Raises:
        InvalidNameError: ``raw`` is not an identifier, or its snake_case form is a keyword.
    """
    name = snake_case(_check_identifier(raw, "tool"))
    if keyword.iskeyword(name):
        raise InvalidNameError(f"'{raw}' is not a valid tool name: '{name}' is a Python keyword.")
    return name


def app_name(raw: str) -> str:
    """A Django app package name: an identifier, used as given (``chat``, ``ai``).

    Raises:
        InvalidNameError: ``raw`` is not an identifier or is a keyword.
    """
    return _check_identifier(raw, "app")
