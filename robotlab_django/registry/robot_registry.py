"""The registry: robot and network names -> factories that build a fresh robot or network.

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

Networks work the same way: :func:`register_network` takes a function (or a class with a
``build`` classmethod) returning a :class:`robotlab.Network`; a thread may run a robot or a
network, so the two share one namespace. ``ROBOTLAB["ROBOTS"]`` and ``ROBOTLAB["NETWORKS"]``
add them by dotted path. This module reads no setting at import, so a robot module imports
without a configured Django.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, overload

from robotlab_django.registry.discovery import import_robot_modules
from robotlab_django.registry.entries import (
    Registered,
    RegisteredNetwork,
    RegisteredRobot,
    network_entry,
    robot_entry,
)
from robotlab_django.registry.errors import RobotAlreadyRegistered, UnknownNetworkError, UnknownRobotError
from robotlab_django.scaffolding import naming

__all__ = ["RobotRegistry", "register_network", "register_robot", "registry"]

T = TypeVar("T")


class RobotRegistry:
    """Robot and network factories by name. The app uses the module-level :data:`registry`."""

    def __init__(self) -> None:
        self._robots: dict[str, RegisteredRobot] = {}
        self._networks: dict[str, RegisteredNetwork] = {}
        self._lock = threading.RLock()

    def _add(self, entry: Registered, replace: bool) -> None:
        """Store ``entry``; a name is taken by one robot or network (a thread names one of them)."""
        own, other = ((self._robots, self._networks) if isinstance(entry, RegisteredRobot)
                      else (self._networks, self._robots))
        with self._lock:
            current = own.get(entry.name) or other.get(entry.name)
            if current is not None and not replace and current.origin != entry.origin:
                raise RobotAlreadyRegistered(
                    f"{current.kind.capitalize()} '{entry.name}' is already registered by {current.origin}; "
                    f"the {entry.kind} {entry.origin} cannot take the name (pass replace=True to override it)."
                )
            other.pop(entry.name, None)
            own[entry.name] = entry  # type: ignore[assignment]  # own holds entries of entry's kind

    def register(self, target: T, *, name: str | None = None, description: str | None = None,
                 replace: bool = False, on_busy: str | None = None) -> T:
        """Register ``target`` (a class with ``build``, or a function returning a robot) and return it.

        Registering the same class or function again (a module imported twice) replaces the entry. ``on_busy``
        is what a message does while the thread's reply runs (:mod:`robotlab_django.runs.busy`); a class may
        say it as its ``on_busy`` attribute.

        Raises:
            RobotAlreadyRegistered: another factory already has the name and ``replace`` is false.
            TypeError: ``target`` is not a factory.
            ValueError: ``on_busy`` names no policy.
        """
        self._add(robot_entry(target, name=name, description=description, on_busy=on_busy), replace)
        return target

    def register_network(self, target: T, *, name: str | None = None, description: str | None = None,
                         replace: bool = False, on_busy: str | None = None) -> T:
        """Register a network factory (a function or a class with ``build``) and return it.

        The factory is called for every run, with ``llm=`` when the app has one configured
        (``ROBOTLAB["LLM"]``); pass it on to the robots it builds.

        Raises:
            RobotAlreadyRegistered: a robot or another network has the name and ``replace`` is false.
            TypeError: ``target`` is not a factory (a :class:`robotlab.Network` instance, say).
            ValueError: ``on_busy`` names no policy.
        """
        self._add(network_entry(target, name=name, description=description, on_busy=on_busy), replace)
        return target

    def unregister(self, name: str) -> None:
        """Forget the robot or network ``name`` (no error when it is not registered)."""
        with self._lock:
            self._robots.pop(name, None)
            self._networks.pop(name, None)

    def clear(self) -> None:
        """Forget every registered robot and network (those from ``ROBOTLAB["ROBOTS"]``/``["NETWORKS"]`` stay)."""
        with self._lock:
            self._robots.clear()
            self._networks.clear()

    def _from_settings(self, key: str = "ROBOTS") -> dict[str, Any]:
        """The factories ``ROBOTLAB[key]`` names: each value, or its dict's ``"factory"`` (options alone add none)."""
        from robotlab_django.conf import app_settings

        value = app_settings.get(key)
        found = {}
        for name, target in (value.items() if isinstance(value, dict) else ()):
            factory = target.get("factory") if isinstance(target, dict) else target
            if factory is not None:
                found[name] = factory
        return found

    def names(self) -> list[str]:
        """Every robot name, registered or from settings, sorted."""
        with self._lock:
            return sorted({*self._robots, *self._from_settings()})

    def network_names(self) -> list[str]:
        """Every network name, registered or from settings, sorted."""
        with self._lock:
            return sorted({*self._networks, *self._from_settings("NETWORKS")})

    def get_network(self, name: str) -> RegisteredNetwork:
        """The network registered (or listed in ``ROBOTLAB["NETWORKS"]``) as ``name``.

        Raises:
            UnknownNetworkError: no network has that name (the message lists the registered ones).
        """
        with self._lock:
            entry = self._networks.get(name)
        if entry is not None:
            return entry
        configured = self._from_settings("NETWORKS")
        if name not in configured:
            raise UnknownNetworkError(name, self.network_names())
        from django.utils.module_loading import import_string

        path = configured[name]
        found = network_entry(import_string(path) if isinstance(path, str) else path, name=name, description=None)
        return RegisteredNetwork(name=name, factory=found.factory, description=found.description,
                                 origin=str(path) if isinstance(path, str) else found.origin, on_busy=found.on_busy)

    def is_network(self, name: str) -> bool:
        """Whether ``name`` is a network (and no robot has it)."""
        return name not in self.names() and name in self.network_names()

    def lookup(self, name: str) -> Registered:
        """What a thread runs under ``name``: the robot (see :meth:`get`), else the network.

        Raises:
            UnknownRobotError: neither a robot nor a network has that name (the message lists both).
        """
        try:
            return self.get(name)
        except UnknownRobotError as exc:
            if name in self.network_names():
                return self.get_network(name)
            raise UnknownRobotError(name, exc.known, networks=self.network_names()) from None

    def resolve_runnable(self, target: object) -> Registered:
        """A robot or network by name (:meth:`lookup`) or entry; a robot by class or function (:meth:`resolve`)."""
        if isinstance(target, str):
            return self.lookup(target)
        if isinstance(target, RegisteredNetwork):
            return target
        return self.resolve(target)

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
                found = robot_entry(target, name=candidate, description=None)
                return RegisteredRobot(name=candidate, factory=found.factory, description=found.description,
                                       origin=str(path) if isinstance(path, str) else found.origin,
                                       on_busy=found.on_busy)
        raise UnknownRobotError(name, self.names())

    def resolve(self, robot: object) -> RegisteredRobot:
        """A robot given by name, or by the class or function registered for it.

        An unregistered class or function is registered on the way (so a job may name its robot by class).

        Raises:
            UnknownRobotError: a name that is not registered.
        """
        if isinstance(robot, str):
            return self.get(robot)
        if isinstance(robot, RegisteredRobot):
            return robot
        entry = robot_entry(robot, name=None, description=None)
        with self._lock:
            current = self._robots.get(entry.name)
            if current is None or current.origin != entry.origin:
                self.register(robot)
            return self._robots[entry.name]

    def build(self, name: str, **options: object) -> Any:
        """Build a fresh robot ``name`` with ``options`` (no app settings applied; see ``services.build_robot``)."""
        return self.get(name).build(**options)

    def build_network(self, name: str, **options: object) -> Any:
        """Build a fresh network ``name`` (no app settings applied; see ``runnables.build_network``)."""
        return self.get_network(name).build(**options)

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
        return import_robot_modules(module_names)


#: The registry the app uses.
registry = RobotRegistry()


@overload
def register_robot(target: T, /) -> T: ...
@overload
def register_robot(*, name: str | None = None, description: str | None = None,
                   replace: bool = False, on_busy: str | None = None) -> Callable[[T], T]: ...
def register_robot(target: T | None = None, /, *, name: str | None = None, description: str | None = None,
                   replace: bool = False, on_busy: str | None = None) -> T | Callable[[T], T]:
    """Register a robot factory in :data:`registry`: ``@register_robot`` or ``@register_robot(name=..., ...)``."""
    if target is not None:
        return registry.register(target, name=name, description=description, replace=replace, on_busy=on_busy)

    def decorator(inner: T) -> T:
        return registry.register(inner, name=name, description=description, replace=replace, on_busy=on_busy)

    return decorator


@overload
def register_network(target: T, /) -> T: ...
@overload
def register_network(*, name: str | None = None, description: str | None = None,
                     replace: bool = False, on_busy: str | None = None) -> Callable[[T], T]: ...
def register_network(target: T | None = None, /, *, name: str | None = None, description: str | None = None,
                     replace: bool = False, on_busy: str | None = None) -> T | Callable[[T], T]:
    """Register a network factory in :data:`registry`: ``@register_network`` or ``@register_network(name=...)``.

    ::

        @register_network(name="support", description="Routes a question to a specialist")
        def support_network(*, llm=None):
            options = {"llm": llm} if llm else {}
            network = robotlab.create_network(name="support", router=...)
            network.task("classifier", robotlab.build(name="classifier", **options))
            ...
            return network
    """
    if target is not None:
        return registry.register_network(target, name=name, description=description, replace=replace,
                                         on_busy=on_busy)

    def decorator(inner: T) -> T:
        return registry.register_network(inner, name=name, description=description, replace=replace,
                                         on_busy=on_busy)

    return decorator
