"""``manage.py robotlab_mcp [NAME ...]``: serve the project's registered robots as an MCP server.

Each robot becomes an MCP tool named after it (``--prompts`` also offers it as a prompt), built
fresh for every call with the app's settings (``ROBOTLAB["LLM"]``, ``DEFAULT_MODEL``, ...)::

    python manage.py robotlab_mcp                          # every robot, over stdio
    python manage.py robotlab_mcp support billing --transport streamable-http --port 8765
    python manage.py robotlab_mcp --list                   # what would be served
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any, TypedDict, Unpack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.registry import UnknownRobotError, registry


def robot_factories(names: list[str]) -> list[Any]:
    """One factory (``name``, ``description``, ``build()``) per robot, building with the app's services.

    Raises:
        CommandError: a name that is not registered, or no robots at all.
    """
    from robotlab_django import services

    chosen = names or registry.names()
    if not chosen:
        raise CommandError(
            "No robots are registered: add a robots module to an installed app "
            "('manage.py startrobot NAME' writes one) or list robots in ROBOTLAB['ROBOTS']."
        )
    factories = []
    for name in chosen:
        try:
            entry = registry.get(name)
        except UnknownRobotError as exc:
            raise CommandError(str(exc)) from exc
        factories.append(
            SimpleNamespace(
                name=entry.name,
                description=entry.description,
                build=lambda robot=entry.name: services.build_robot(robot),
            )
        )
    return factories


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    robots: list[str]
    transport: str
    host: str
    port: int
    path: str
    name: str
    prompts: bool
    list: bool


class Command(BaseCommand):
    """Serve registered robots over MCP (stdio or streamable HTTP)."""

    help = "Serve the project's registered robots as an MCP server: each robot is a tool taking a message."

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("robots", nargs="*", help="Robot names (default: every registered robot).")
        parser.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http"])
        parser.add_argument("--host", default="127.0.0.1", help="Address for streamable HTTP.")
        parser.add_argument("--port", type=int, default=8000, help="Port for streamable HTTP.")
        parser.add_argument("--path", default="/mcp", help="Endpoint path for streamable HTTP.")
        parser.add_argument("--name", default="robotlab", help="The MCP server's name.")
        parser.add_argument("--prompts", action="store_true", help="Also offer each robot as an MCP prompt.")
        parser.add_argument(
            "--list", action="store_true", help="Print the robots that would be served and exit."
        )

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Serve until interrupted (stdio stays silent on stdout: it carries the protocol)."""
        from robotlab.mcp import create_server, serve

        factories = robot_factories(list(options["robots"]))
        if options["list"]:
            for factory in factories:
                self.stdout.write(f"{factory.name}: {factory.description or ''}".rstrip(": "))
            return
        create_server(*factories, name=options["name"], prompts=options["prompts"])  # fail before serving
        where = (
            "stdio"
            if options["transport"] == "stdio"
            else f"http://{options['host']}:{options['port']}{options['path']}"
        )
        sys.stderr.write(f"Serving {', '.join(f.name for f in factories)} over MCP on {where}\n")
        serve(
            *factories,
            transport=options["transport"],
            host=options["host"],
            port=options["port"],
            path=options["path"],
            name=options["name"],
            prompts=options["prompts"],
        )
