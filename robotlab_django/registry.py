"""The robot registry: robot names -> factories that build a fresh robot.

Robots are stateful (one conversation each), so the app keeps *factories* and builds a new
robot for every run, restoring the thread's history into it. Register a factory with the
:func:`register_robot` decorator in a ``robots`` module of any installed app; the app imports
those modules at startup (:meth:`RobotRegistry.autodiscover`)::

    @register_robot
    class SupportRobot:
        name = "support"
        description = "Answers support questions"

        @classmethod
        def build(cls, **options):
            return robotlab.build(name=cls.name, system_prompt="...", **options)

``ROBOTLAB["ROBOTS"]`` adds robots by dotted path. This module reads no setting at import,
so a robot module imports without a configured Django.
"""

from __future__ import annotations

import difflib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import import_module
from typing import Any, TypeVar, overload

from . import naming

__all__ = [
    "RegisteredRobot",
    "RobotAlreadyRegistered",
    "RobotRegistry",
    "UnknownRobotError",
    "register_robot",
    "registry",
]

T = TypeVar("T")


class UnknownRobotError(LookupError):
    """No robot is registered under a name."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        if known:
            message = f"Unknown robot '{name}'. Registered robots: {', '.join(known)}."
            close = difflib.get_close_matches(name, known, n=1)
            if close:
                message += f" Did you mean '{close[0]}'?"
        else:
            message = (
                f"Unknown robot '{name}': no robots are registered. Add a robots module to an installed app "
                "('manage.py startrobot NAME' writes one) or list robots in ROBOTLAB['ROBOTS']."
            )
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])


class RobotAlreadyRegistered(ValueError):
    """Two different factories claim the same robot name."""


@dataclass(frozen=True)
class RegisteredRobot:
    """A registered robot: its name, its factory and where the factory comes from."""

    name: str
    factory: Callable[..., Any]
    description: str | None = None
    origin: str = ""

    def build(self, **options: Any) -> Any:
        """Call the factory and check that it returned a :class:`robotlab.Robot`.

        Raises:
            TypeError: the factory returned something else.
        """
        from robotlab.robot import Robot

        robot = self.factory(**options)
        if not isinstance(robot, Robot):
            raise TypeError(
                f"The factory of robot '{self.name}' ({self.origin}) returned {type(robot).__name__}, "
                "not a robotlab.Robot."
            )
        return robot


def _origin(target: Any) -> str:
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", None) or repr(target)
    return f"{module}.{qualname}"


def _entry(target: Any, *, name: str | None, description: str | None) -> RegisteredRobot:
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
                               origin=_origin(target))
    if not callable(target):
        raise TypeError(f"A robot factory must be callable, got {target!r}.")
    robot = name or getattr(target, "robot_name", None) or getattr(target, "__name__", None)
    if not robot:
        raise TypeError(f"Give the robot a name: register_robot({target!r}, name='...').")
    return RegisteredRobot(name=str(robot), factory=target,
                           description=description or getattr(target, "description", None),
                           origin=_origin(target))


class RobotRegistry:
    """Robot factories by name. The app uses the module-level :data:`registry`."""

    def __init__(self) -> None:
        self._robots: dict[str, RegisteredRobot] = {}
        self._lock = threading.RLock()

    def register(self, target: T, *, name: str | None = None, description: str | None = None,
                 replace: bool = False) -> T:
        """Register ``target`` (a class with ``build``, or a function returning a robot) and return it.

        Registering the same class or function again (a module imported twice) replaces the entry.

        Raises:
            RobotAlreadyRegistered: another factory already has the name and ``replace`` is false.
            TypeError: ``target`` is not a factory.
        """
        entry = _entry(target, name=name, description=description)
        with self._lock:
            current = self._robots.get(entry.name)
            if current is not None and not replace and current.origin != entry.origin:
                raise RobotAlreadyRegistered(
                    f"Robot '{entry.name}' is already registered by {current.origin}; {entry.origin} cannot "
                    "take the name (pass replace=True to override it)."
                )
            self._robots[entry.name] = entry
        return target

    def unregister(self, name: str) -> None:
        """Forget the robot ``name`` (no error when it is not registered)."""
        with self._lock:
            self._robots.pop(name, None)

    def clear(self) -> None:
        """Forget every registered robot (robots from ``ROBOTLAB["ROBOTS"]`` stay)."""
        with self._lock:
            self._robots.clear()

    def _from_settings(self) -> dict[str, Any]:
        from .conf import app_settings

        robots = app_settings.ROBOTS
        return robots if isinstance(robots, dict) else {}

    def names(self) -> list[str]:
        """Every robot name, registered or from settings, sorted."""
        with self._lock:
            return sorted({*self._robots, *self._from_settings()})

    def get(self, name: str) -> RegisteredRobot:
        """The robot registered as ``name``; ``Support`` and ``SupportRobot`` find ``support`` too.

        Raises:
            UnknownRobotError: no robot has that name (the message lists the registered ones).
        """
        candidates = [name]
        try:
            normalised = naming.robot_name(name).robot_name
        except naming.InvalidNameError:
            normalised = None
        if normalised and normalised != name:
            candidates.append(normalised)
        configured = self._from_settings()
        for candidate in candidates:
            with self._lock:
                entry = self._robots.get(candidate)
            if entry is not None:
                return entry
            if candidate in configured:
                from django.utils.module_loading import import_string

                path = configured[candidate]
                target = import_string(path) if isinstance(path, str) else path
                found = _entry(target, name=candidate, description=None)
                return RegisteredRobot(name=candidate, factory=found.factory, description=found.description,
                                       origin=str(path) if isinstance(path, str) else found.origin)
        raise UnknownRobotError(name, self.names())

    def resolve(self, robot: Any) -> RegisteredRobot:
        """A robot given by name, or by the class or function registered for it.

        An unregistered class or function is registered on the way (so a job may name its robot by class).

        Raises:
            UnknownRobotError: a name that is not registered.
        """
        if isinstance(robot, str):
            return self.get(robot)
        if isinstance(robot, RegisteredRobot):
            return robot
        entry = _entry(robot, name=None, description=None)
        with self._lock:
            current = self._robots.get(entry.name)
            if current is None or current.origin != entry.origin:
                self.register(robot)
            return self._robots[entry.name]

    def build(self, name: str, **options: Any) -> Any:
        """Build a fresh robot ``name`` with ``options`` (no app settings applied; see ``services.build_robot``)."""
        return self.get(name).build(**options)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def autodiscover(self, module_names: tuple[str, ...] | None = None) -> list[str]:
        """Import each installed app's robot modules (``ROBOTLAB["ROBOT_MODULES"]``, default ``robots``).

        A package's submodules are imported as well, except those whose name starts with ``_``.
        An error inside a robot module propagates (as the admin's autodiscovery does).

        Returns:
            The dotted names of the modules imported.
        """
        from django.apps import apps
        from django.utils.module_loading import module_has_submodule

        from .conf import app_settings

        imported: list[str] = []
        for config in apps.get_app_configs():
            for module_name in module_names or app_settings.ROBOT_MODULES:
                if not module_has_submodule(config.module, module_name):
                    continue
                module = import_module(f"{config.name}.{module_name}")
                imported.append(module.__name__)
                for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
                    if not info.name.startswith("_"):
                        imported.append(import_module(f"{module.__name__}.{info.name}").__name__)
        return imported


#: The registry the app uses.
registry = RobotRegistry()


@overload
def register_robot(target: T, /) -> T: ...
@overload
def register_robot(*, name: str | None = None, description: str | None = None,
                   replace: bool = False) -> Callable[[T], T]: ...
def register_robot(target: Any = None, /, *, name: str | None = None, description: str | None = None,
                   replace: bool = False) -> Any:
    """Register a robot factory in :data:`registry`; usable as ``@register_robot`` or ``@register_robot(name=...)``."""
    if target is not None:
        return registry.register(target, name=name, description=description, replace=replace)

    def decorator(inner: T) -> T:
        return registry.register(inner, name=name, description=description, replace=replace)

    return decorator
