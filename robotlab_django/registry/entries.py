"""The registry's entries: a robot's or a network's name, factory, description and origin, read from a target.

A target is what a project registers: a class with a ``build`` classmethod, or a function returning a fresh
:class:`robotlab.Robot` (:func:`robot_entry`) or :class:`robotlab.Network` (:func:`network_entry`). A robot or
network instance is refused: it keeps its conversations, so the app builds a new one for every run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from robotlab_django.conf import ON_BUSY_POLICIES, ROBOT_OPTIONS
from robotlab_django.scaffolding import naming

__all__ = ["Registered", "RegisteredNetwork", "RegisteredRobot", "network_entry", "on_busy_policy", "robot_entry",
           "settings_entry_problem"]


@dataclass(frozen=True)
class _Registration:
    name: str
    factory: Callable[..., Any]
    description: str | None = None
    origin: str = ""
    #: What a message does while the thread's reply runs (``None``: the setting's, else ``"enqueue"``).
    on_busy: str | None = None
    kind: ClassVar[str]

    @staticmethod
    def _builds() -> type:
        raise NotImplementedError

    def build(self, **options: object) -> Any:
        """Call the factory and check that it returned what this entry registers.

        Raises:
            TypeError: the factory returned something else.
        """
        expected = self._builds()
        built = self.factory(**options)
        if not isinstance(built, expected):
            raise TypeError(
                f"The factory of {self.kind} '{self.name}' ({self.origin}) returned {type(built).__name__}, "
                f"not a robotlab.{expected.__name__}."
            )
        return built


@dataclass(frozen=True)
class RegisteredRobot(_Registration):
    """A registered robot: its name, its factory and where the factory comes from.

    ``build(**options)`` calls the factory and raises ``TypeError`` unless it returned a :class:`robotlab.Robot`.
    """

    kind: ClassVar[str] = "robot"

    @staticmethod
    def _builds() -> type:
        from robotlab.robot import Robot

        return Robot


@dataclass(frozen=True)
class RegisteredNetwork(_Registration):
    """A registered network: its name, its factory and where the factory comes from.

    ``build(**options)`` calls the factory and raises ``TypeError`` unless it returned a :class:`robotlab.Network`.
    """

    kind: ClassVar[str] = "network"

    @staticmethod
    def _builds() -> type:
        from robotlab.network import Network

        return Network


#: What a thread runs under its name: a robot or a network.
Registered = RegisteredRobot | RegisteredNetwork


def on_busy_policy(value: object) -> str | None:
    """``value`` if it names an on-busy policy (:data:`~robotlab_django.conf.ON_BUSY_POLICIES`) or is ``None``.

    Raises:
        ValueError: it names none.
    """
    if value is None or value in ON_BUSY_POLICIES:
        return None if value is None else str(value)
    raise ValueError(f"on_busy is {value!r}; choose one of: {', '.join(ON_BUSY_POLICIES)}.")


def settings_entry_problem(value: object) -> str:
    """What is wrong with ``value`` as an entry of ``ROBOTLAB["ROBOTS"]`` (``["NETWORKS"]``); ``""`` when nothing.

    An entry is a dotted path or a callable (the factory), or a dict of :data:`~robotlab_django.conf.ROBOT_OPTIONS`.
    """
    if isinstance(value, str) or callable(value):
        return ""
    if not isinstance(value, dict):
        return f"{value!r} is neither a dotted path, a callable nor a dict of options"
    unknown = sorted(str(key) for key in value if key not in ROBOT_OPTIONS)
    factory = value.get("factory")
    if unknown:
        return f"unknown options {unknown} (the options are {', '.join(ROBOT_OPTIONS)})"
    if factory is not None and not (isinstance(factory, str) or callable(factory)):
        return f"its factory {factory!r} is neither a dotted path nor a callable"
    try:
        on_busy_policy(value.get("on_busy"))
    except ValueError as exc:
        return str(exc).rstrip(".")
    return ""


def _on_busy(target: object, given: str | None) -> str | None:
    """The on-busy policy given, else the target's ``on_busy`` attribute (checked)."""
    return on_busy_policy(given or getattr(target, "on_busy", None))


def _origin(target: object) -> str:
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", None) or repr(target)
    return f"{module}.{qualname}"


def robot_entry(target: object, *, name: str | None, description: str | None,
                on_busy: str | None = None) -> RegisteredRobot:
    """The entry of the robot factory ``target``, named ``name`` or after the class or function.

    ``on_busy`` defaults to the target's ``on_busy`` attribute.

    Raises:
        TypeError: ``target`` is not a factory (a :class:`robotlab.Robot` instance, a class without ``build``).
        ValueError: ``on_busy`` names no policy.
    """
    from robotlab.robot import Robot

    if isinstance(target, Robot):
        raise TypeError(
            f"Register a factory, not the Robot instance {target.name!r}: a robot keeps one conversation, so "
            "the app builds a new one for every run. Register a function or a class with a build() classmethod."
        )
    if isinstance(target, type):
        factory = getattr(target, "build", None)
        if not callable(factory):
            raise TypeError(f"{target.__name__} has no build() classmethod to make robots with.")
        robot = name or getattr(target, "name", None) or naming.robot_name(target.__name__).robot_name
        return RegisteredRobot(name=str(robot), factory=factory,
                               description=description or getattr(target, "description", None),
                               origin=_origin(target), on_busy=_on_busy(target, on_busy))
    if not callable(target):
        raise TypeError(f"A robot factory must be callable, got {target!r}.")
    robot = name or getattr(target, "robot_name", None) or getattr(target, "__name__", None)
    if not robot:
        raise TypeError(f"Give the robot a name: register_robot({target!r}, name='...').")
    return RegisteredRobot(name=str(robot), factory=target,
                           description=description or getattr(target, "description", None),
                           origin=_origin(target), on_busy=_on_busy(target, on_busy))


def network_entry(target: object, *, name: str | None, description: str | None,
                  on_busy: str | None = None) -> RegisteredNetwork:
    """The entry of the network factory ``target``, named ``name`` or after the class or function.

    ``on_busy`` defaults to the target's ``on_busy`` attribute.

    Raises:
        TypeError: ``target`` is not a factory (a :class:`robotlab.Network` instance, a class without ``build``).
        ValueError: ``on_busy`` names no policy.
    """
    from robotlab.network import Network

    if isinstance(target, Network):
        raise TypeError(
            f"Register a factory, not the Network instance {target.name!r}: its robots keep their conversations, "
            "so the app builds a new network for every run. Register a function or a class with a build() "
            "classmethod."
        )
    if isinstance(target, type):
        factory = getattr(target, "build", None)
        if not callable(factory):
            raise TypeError(f"{target.__name__} has no build() classmethod to make networks with.")
        network = name or getattr(target, "name", None) or naming.snake_case(target.__name__)
    elif callable(target):
        factory = target
        network = name or getattr(target, "network_name", None) or getattr(target, "__name__", None)
        if not network:
            raise TypeError(f"Give the network a name: register_network({target!r}, name='...').")
    else:
        raise TypeError(f"A network factory must be callable, got {target!r}.")
    return RegisteredNetwork(name=str(network), factory=factory,
                             description=description or getattr(target, "description", None),
                             origin=_origin(target), on_busy=_on_busy(target, on_busy))
