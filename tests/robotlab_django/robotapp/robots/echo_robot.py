"""Robots the test suite runs: ``echo`` (no tools) and ``calculator`` (one tool)."""

from __future__ import annotations

from typing import Any

import robotlab
from robotlab_django.registry import register_robot


@register_robot
class EchoRobot:
    """A plain robot."""

    name = "echo"
    description = "Repeats things"

    @classmethod
    def build(cls, **options: Any) -> robotlab.Robot:
        """A fresh echo robot."""
        return robotlab.build(name=cls.name, description=cls.description, system_prompt="You echo.", **options)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@register_robot(name="calculator", description="Adds numbers")
def build_calculator(**options: Any) -> robotlab.Robot:
    """A fresh calculator robot with the ``add`` tool."""
    return robotlab.build(name="calculator", system_prompt="You add numbers.", local_tools=[add], **options)
