"""Robots and networks served as MCP servers, with the SDK's ``MCPServer``.

Each robot (or network) becomes one MCP tool named after it, taking a ``message`` and returning
the reply; with ``prompts=True`` it is also an MCP prompt carrying its instructions::

    server = create_server(support_robot, billing_network)   # an mcp.server.mcpserver.MCPServer
    serve(support_robot, transport="stdio")                   # blocks; or "streamable-http"

From a shell, name robots as ``module:attribute`` (a robot, a network, a list of them, or a
function that builds a robot)::

    python -m robotlab.mcp.server myapp.robots:support --transport streamable-http --port 8000

A robot instance keeps one conversation, so calls to it are taken one at a time; pass a factory
(a function returning a robot, or an object with ``name`` and ``build()``) to get a fresh robot
for every call, as a web server wants.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import re
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import Field

__all__ = ["BackgroundHTTPServer", "create_server", "main", "reply_text", "serve"]

_MESSAGE_HELP = "What to ask: the user's message, sent to the robot as it is."


def reply_text(result: object) -> str:
    """The text of a run's result: a :class:`~robotlab.RobotResult`'s reply, a network's last reply."""
    if hasattr(result, "reply"):
        return "" if result.reply is None else str(result.reply)
    if hasattr(result, "value"):
        return reply_text(result.value)
    return "" if result is None else str(result)


class _Served:
    """One robot, network or factory as the server sees it."""

    def __init__(self, target: Any) -> None:
        self.factory: Callable[[], Any] | None = None
        self.instance: Any = None
        if hasattr(target, "arun"):
            self.instance = target
            sample = target
        elif callable(getattr(target, "build", None)) and getattr(target, "name", None):
            self.factory = target.build
            sample = target
        elif callable(target):
            self.factory = target
            sample = target()
        else:
            raise TypeError(
                f"Cannot serve {target!r}: give a robot, a network, or a function that builds a robot"
            )
        self.name = str(sample.name)
        self.tool_name = re.sub(r"[^A-Za-z0-9_.-]", "_", self.name)[:128] or "robot"
        self.description = (
            getattr(sample, "description", None) or f"Ask the {self._kind(sample)} '{self.name}'."
        )
        self.lock = asyncio.Lock() if self.instance is not None else None

    @staticmethod
    def _kind(sample: object) -> str:
        return "network" if getattr(sample, "is_network", False) else "robot"

    def get(self) -> Any:
        return self.instance if self.instance is not None else self.factory()  # type: ignore[misc]

    async def ask(self, message: str) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        runnable = self.get()
        try:
            if self.lock is None:
                result = await runnable.arun(message)
            else:
                async with self.lock:
                    result = await runnable.arun(message)
        except Exception as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        return reply_text(result)

    def prompt(self, message: str) -> str:
        instructions = getattr(self.get(), "instructions", None) or ""
        return "\n\n".join(part for part in (instructions, message) if part)


def create_server(
    *runnables: Any,
    name: str = "robotlab",
    instructions: str | None = None,
    prompts: bool = False,
    tools: bool = True,
) -> Any:
    """An SDK ``MCPServer`` with a tool (and, with ``prompts=True``, a prompt) for each robot.

    Args:
        runnables: Robots, networks, lists of them, or factories (see the module docstring).
        name: The server's name.
        instructions: Told to clients on connect; defaults to a list of the robots.
        prompts: Also offer each robot as a prompt (its instructions, then the message).
        tools: Offer each robot as a tool.

    Raises:
        TypeError: something that is not a robot, a network or a factory.
        ValueError: two robots with the same name.
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.prompts.base import Prompt

    served: list[_Served] = []
    for item in runnables:
        for target in item if isinstance(item, list | tuple) else [item]:
            served.append(_Served(target))
    names = [s.tool_name for s in served]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Two robots would share the MCP name {', '.join(duplicates)}; rename one")
    summary = "; ".join(f"{s.tool_name}: {s.description}" for s in served)
    root = logging.getLogger()
    guard = logging.NullHandler() if not root.handlers else None
    if guard is not None:  # MCPServer calls logging.basicConfig(); keep the application's logging as it is
        root.addHandler(guard)
    try:
        server = MCPServer(
            name, instructions=instructions or f"RobotLab robots you can ask: {summary}", log_level="WARNING"
        )
    finally:
        if guard is not None:
            root.removeHandler(guard)
    for entry in served:
        if tools:
            server.add_tool(_tool_function(entry), name=entry.tool_name, description=entry.description)
        if prompts:
            server.add_prompt(
                Prompt.from_function(
                    _prompt_function(entry), name=entry.tool_name, description=entry.description
                )
            )
    return server


def _tool_function(entry: _Served) -> Callable[..., Any]:
    async def ask(message: Annotated[str, Field(description=_MESSAGE_HELP)]) -> str:
        return await entry.ask(message)

    return ask


def _prompt_function(entry: _Served) -> Callable[..., Any]:
    def prompt(message: Annotated[str, Field(description=_MESSAGE_HELP)] = "") -> str:
        return entry.prompt(message)

    return prompt


def serve(
    *runnables: Any,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "robotlab",
    prompts: bool = False,
    stateless: bool = False,
) -> None:
    """Serve robots over ``"stdio"`` or ``"streamable-http"`` (``http://host:port/path``) until stopped.

    Raises:
        ValueError: an unknown transport.
    """
    import anyio

    server = create_server(*runnables, name=name, prompts=prompts)
    if transport == "stdio":
        anyio.run(server.run_stdio_async)
    elif transport in ("streamable-http", "http"):
        anyio.run(
            lambda: server.run_streamable_http_async(
                host=host, port=port, streamable_http_path=path, stateless_http=stateless
            )
        )
    else:
        raise ValueError(f"Unknown MCP transport {transport!r}: use 'stdio' or 'streamable-http'")


class BackgroundHTTPServer:
    """An MCP server on streamable HTTP in a background thread (tests, notebooks, embedding).

    For example::

        with BackgroundHTTPServer(create_server(robot)) as http:
            MCPClient({"name": "robots", "transport": {"type": "streamable-http", "url": http.url}})

    ``port=0`` picks a free port; :attr:`url` says which. ``transport="sse"`` serves the older SSE
    transport instead (at ``/sse`` unless ``path`` says otherwise).

    Raises:
        ValueError: an unknown transport.
    """

    def __init__(
        self,
        server: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str | None = None,
        stateless: bool = False,
        transport: str = "streamable-http",
    ) -> None:
        self.server = server
        self.host = host
        if transport not in ("streamable-http", "sse"):
            raise ValueError(f"Unknown MCP transport {transport!r}: use 'streamable-http' or 'sse'")
        self.transport = transport
        self.path = path or ("/mcp" if transport == "streamable-http" else "/sse")
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.port: int = self._socket.getsockname()[1]
        self._stateless = stateless
        self._uvicorn: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint, ``http://host:port/path``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    def start(self, timeout: float = 10) -> BackgroundHTTPServer:
        """Start serving and wait until the server accepts connections.

        Raises:
            RuntimeError: it did not start within ``timeout`` seconds.
        """
        import uvicorn

        if self.transport == "sse":
            app = self.server.sse_app(sse_path=self.path, host=self.host)
        else:
            app = self.server.streamable_http_app(
                streamable_http_path=self.path, stateless_http=self._stateless, host=self.host
            )
        self._uvicorn = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        started = threading.Event()

        async def run() -> None:
            serving = asyncio.ensure_future(self._uvicorn.serve(sockets=[self._socket]))
            while not self._uvicorn.started and not serving.done():
                await asyncio.sleep(0.01)
            started.set()
            await serving

        self._thread = threading.Thread(
            target=asyncio.run, args=(run(),), name="robotlab-mcp-http", daemon=True
        )
        self._thread.start()
        if not started.wait(timeout) or not self._uvicorn.started:
            self.stop()
            raise RuntimeError(f"The MCP HTTP server did not start on {self.url}")
        return self

    def stop(self, timeout: float = 10) -> None:
        """Stop serving and wait for the thread."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._socket.close()

    def __enter__(self) -> BackgroundHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _load(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"robotlab.mcp.server: give robots as module:attribute, got {spec!r}")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m robotlab.mcp.server module:robot [...] [--transport streamable-http] [--port N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m robotlab.mcp.server", description="Serve robots over MCP."
    )
    parser.add_argument(
        "robots", nargs="+", help="module:attribute of a robot, a network, a list or a factory"
    )
    parser.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("--name", default="robotlab")
    parser.add_argument("--prompts", action="store_true", help="also offer each robot as an MCP prompt")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # stderr
    serve(
        *[_load(spec) for spec in args.robots],
        transport=args.transport,
        host=args.host,
        port=args.port,
        path=args.path,
        name=args.name,
        prompts=args.prompts,
    )


if __name__ == "__main__":
    main()
