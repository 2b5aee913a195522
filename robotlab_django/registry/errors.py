"""The registry's errors: an unknown robot or network name (with the names it might have meant), a name taken."""

from __future__ import annotations

import difflib

from robotlab.errors import RobotLabError

__all__ = ["RobotAlreadyRegistered", "UnknownNetworkError", "UnknownRobotError"]


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
