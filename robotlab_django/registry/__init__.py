"""The registry: robot and network names -> factories (:mod:`.robot_registry`), their entries, errors and discovery."""

from __future__ import annotations

from robotlab_django.registry.entries import RegisteredNetwork, RegisteredRobot
from robotlab_django.registry.errors import RobotAlreadyRegistered, UnknownNetworkError, UnknownRobotError
from robotlab_django.registry.robot_registry import RobotRegistry, register_network, register_robot, registry

__all__ = [
    "RegisteredNetwork",
    "RegisteredRobot",
    "RobotAlreadyRegistered",
    "RobotRegistry",
    "UnknownNetworkError",
    "UnknownRobotError",
    "register_network",
    "register_robot",
    "registry",
]
