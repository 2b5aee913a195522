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

import difflib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import import_module
from typing import Any, ClassVar, TypeVar, overload

from robotlab.errors import RobotLabError

from . import naming

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

T = TypeVar("T")


class UnknownRobotError(RobotLabError, LookupError):
    """No robot is registered under a name (nor a network, when ``networks`` lists the registered ones)."""

    kind = "robot"
    hint = ("Add a robots module to an installed app ('manage.py startrobot NAME' writes one) or list robots in "
            "ROBOTLAB['ROBOTS'].")

    def __init__(self, name: str, known: list[str], *, networks: list[str] | None = None) -> None:
        self.name = name
        self.known = known
        self.networks = list(networks or [])
        candidates = [*known, *self.networks]
        if candidates:
            message = f"Unknown {self.kind} '{name}'."
            if known:
                message += f" Registered {self.kind}s: {', '.join(known)}."
            if self.networks:
                message += f" Registered networks: {', '.join(self.networks)}."
            close = difflib.get_close_matches(name, candidates, n=1)
            if close:
                message += f" Did you mean '{close[0]}'?"
        else:
            message = f"Unknown {self.kind} '{name}': no {self.kind}s are registered. {self.hint}"
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownNetworkError(UnknownRobotError):
    """No network is registered under a name (a subclass, so ``except UnknownRobotError`` catches both)."""

    kind = "network"
    hint = ("Register a factory with @register_network in a robots module of an installed app, or list it in "
            "ROBOTLAB['NETWORKS'].")

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(name, known)


class RobotAlreadyRegistered(RobotLabError, ValueError):
    """Two different factories claim the same robot or network name."""


@dataclass(frozen=True)
class _Registration:
    name: str
    factory: Callable[..., Any]
    description: str | None = None
    origin: str = ""
    kind: ClassVar[str]

    @staticmethod
    def _builds() -> type:
        raise NotImplementedError

    def build(self, **options: Any) -> Any:
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


Registered = RegisteredRobot | RegisteredNetwork


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


def _network_entry(target: Any, *, name: str | None, description: str | None) -> RegisteredNetwork:
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
                             origin=_origin(target))


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
                 replace: bool = False) -> T:
        """Register ``target`` (a class with ``build``, or a function returning a robot) and return it.

        Registering the same class or function again (a module imported twice) replaces the entry.

        Raises:
            RobotAlreadyRegistered: another factory already has the name and ``replace`` is false.
            TypeError: ``target`` is not a factory.
        """
        self._add(_entry(target, name=name, description=description), replace)
        return target

    def register_network(self, target: T, *, name: str | None = None, description: str | None = None,
                         replace: bool = False) -> T:
        """Register a network factory (a function or a class with ``build``) and return it.

        The factory is called for every run, with ``llm=`` when the app has one configured
        (``ROBOTLAB["LLM"]``); pass it on to the robots it builds.

        Raises:
            RobotAlreadyRegistered: a robot or another network has the name and ``replace`` is false.
            TypeError: ``target`` is not a factory (a :class:`robotlab.Network` instance, say).
        """
        self._add(_network_entry(target, name=name, description=description), replace)
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
        from .conf import app_settings

        value = app_settings.get(key)
        return value if isinstance(value, dict) else {}

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
        found = _network_entry(import_string(path) if isinstance(path, str) else path, name=name, description=None)
        return RegisteredNetwork(name=name, factory=found.factory, description=found.description,
                                 origin=str(path) if isinstance(path, str) else found.origin)

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

    def resolve_runnable(self, target: Any) -> Registered:
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

    def build_network(self, name: str, **options: Any) -> Any:
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


@overload
def register_network(target: T, /) -> T: ...
@overload
def register_network(*, name: str | None = None, description: str | None = None,
                     replace: bool = False) -> Callable[[T], T]: ...
def register_network(target: Any = None, /, *, name: str | None = None, description: str | None = None,
                     replace: bool = False) -> Any:
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
        return registry.register_network(target, name=name, description=description, replace=replace)

    def decorator(inner: T) -> T:
        return registry.register_network(inner, name=name, description=description, replace=replace)

    return decorator
