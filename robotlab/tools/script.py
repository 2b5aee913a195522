"""Script tools: an executable script in a skill's ``scripts/`` folder, callable by the model.

:meth:`ScriptTool.from_path` wraps a script as a :class:`~robotlab.tools.Tool` named after the file
(``check-style.sh`` -> ``check_style``) and described by its first ``#`` comment. The tool takes one
optional ``args`` string, split like a shell would (:func:`shlex.split`) but run as an argument list,
never through a shell: ``["bash", "<script>", *args]``. The model gets the combined stdout and
stderr, or ``"Error (exit <N>):\\n<output>"`` / ``"Error (timed out):\\n<output>"``.

:class:`Capabilities` is what a skill declares it needs (``fs_read``, ``fs_write``, ``network``,
``timeout``, ``trust``); :meth:`Capabilities.ceiling` is the most the configuration allows
(``robotlab.configure(sandbox={...})``); the grant is their :meth:`~Capabilities.intersect`.
RobotLab confines nothing itself. The default executor runs the script with the grant's timeout
(60 s by default) and keeps the first :data:`MAX_OUTPUT_CHARS` characters of its output. Set
:attr:`ScriptTool.executor` to a callable ``executor(cmd, *, capabilities, skill_dir)`` returning
the tool's result to run scripts some other way (in a container, under a sandbox).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import re
import shlex
import signal
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ToolError
from .base import Tool

__all__ = ["DEFAULT_TIMEOUT", "MAX_OUTPUT_CHARS", "TRUST_LEVELS", "Capabilities", "ScriptTool", "format_result"]

logger = logging.getLogger("robotlab")

#: Seconds a skill script may run unless its SKILL.md or the sandbox ceiling says less.
DEFAULT_TIMEOUT = 60
#: The trust levels a skill may declare; anything else is ``"external"``.
TRUST_LEVELS = ("core", "external")
#: The most characters of a script's output the default executor returns.
MAX_OUTPUT_CHARS = 100_000

Executor = Callable[..., Any | Awaitable[Any]]


def _paths(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str | os.PathLike):
        return [os.fspath(value)]
    if isinstance(value, Sequence):
        return [os.fspath(v) if isinstance(v, os.PathLike) else str(v) for v in value]
    return [str(value)]


def _timeout(value: Any) -> int:
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return DEFAULT_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_TIMEOUT


def _expand(paths: Sequence[str]) -> list[str]:
    return [os.path.abspath(os.path.expanduser(p)) for p in paths]


def _clamp(requested: Sequence[str], allowed: Sequence[str]) -> list[str]:
    roots = _expand(allowed)
    return [p for p in _expand(requested) if any(p == r or p.startswith(r.rstrip(os.sep) + os.sep) for r in roots)]


class Capabilities:
    """What a skill script may do: read and write paths, use the network, run for ``timeout`` seconds.

    Bad values fall back to the defaults: a non-positive or non-numeric ``timeout`` is
    :data:`DEFAULT_TIMEOUT`, a ``trust`` outside :data:`TRUST_LEVELS` is ``"external"``, ``network``
    is coerced to a bool and a single path to a one-item list.
    """

    def __init__(
        self,
        fs_read: Sequence[str] | str | None = (),
        fs_write: Sequence[str] | str | None = (),
        network: object = False,
        timeout: Any = DEFAULT_TIMEOUT,
        trust: object = "external",
    ) -> None:
        self.fs_read = _paths(fs_read)
        self.fs_write = _paths(fs_write)
        self.network = bool(network)
        self.timeout = _timeout(timeout)
        self.trust = str(trust) if str(trust) in TRUST_LEVELS else "external"

    @classmethod
    def from_front_matter(cls, front_matter: Mapping[str, Any] | None) -> Capabilities:
        """The capabilities a SKILL.md front matter declares.

        Its ``fs_read``, ``fs_write``, ``network``, ``timeout`` and ``trust`` keys; missing keys get the defaults.
        """
        meta = front_matter or {}

        def value(key: str, default: object) -> Any:
            found = meta.get(key)
            return default if found is None else found

        return cls(
            fs_read=value("fs_read", []),
            fs_write=value("fs_write", []),
            network=value("network", False),
            timeout=value("timeout", DEFAULT_TIMEOUT),
            trust=value("trust", "external"),
        )

    @classmethod
    def ceiling(cls, config: object = None) -> Capabilities:
        """The most any skill may get.

        The configuration's ``sandbox`` section (the current configuration by default); without one, read access to
        the working directory only.
        """
        if config is None:
            from ..config import get_config

            config = get_config()
        section = getattr(config, "sandbox", None)
        if section is None:
            return cls(fs_read=["."])
        read = getattr(section, "fs_read", None)
        return cls(
            fs_read=["."] if read is None else read,
            fs_write=getattr(section, "fs_write", None) or [],
            network=getattr(section, "network", None) or False,
            timeout=getattr(section, "timeout", None) or DEFAULT_TIMEOUT,
        )

    @property
    def is_core(self) -> bool:
        """Whether the skill is trusted as ``"core"``."""
        return self.trust == "core"

    def intersect(self, ceiling: Capabilities) -> Capabilities:
        """The grant.

        Paths kept only when under one of the ceiling's roots (both expanded to absolute paths), network only when
        both allow it, the smaller timeout, and this trust level.
        """
        return Capabilities(
            fs_read=_clamp(self.fs_read, ceiling.fs_read),
            fs_write=_clamp(self.fs_write, ceiling.fs_write),
            network=self.network and ceiling.network,
            timeout=min(self.timeout, ceiling.timeout),
            trust=self.trust,
        )

    def to_dict(self) -> dict[str, Any]:
        """The five fields as a dict."""
        return {"fs_read": list(self.fs_read), "fs_write": list(self.fs_write), "network": self.network,
                "timeout": self.timeout, "trust": self.trust}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Capabilities) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((tuple(self.fs_read), tuple(self.fs_write), self.network, self.timeout, self.trust))

    def __repr__(self) -> str:
        return "Capabilities(" + ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items()) + ")"


def format_result(output: str, returncode: int | None) -> str:
    """The tool result of a finished script.

    Its output when it exited 0, ``"Error (exit <N>):\\n<output>"`` when it failed, ``"Error (timed
    out):\\n<output>"`` when ``returncode`` is ``None`` (killed).
    """
    if returncode is None:
        return f"Error (timed out):\n{output}"
    return output if returncode == 0 else f"Error (exit {returncode}):\n{output}"


def _derive_name(path: Path) -> str:
    stem = re.sub(r"\.[^.]+$", "", path.name)
    return re.sub(r"[^a-zA-Z0-9]+", "_", stem).strip("_")


def _description(path: Path, name: str) -> str:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                stripped = line.strip()
                if not stripped.startswith("#") or stripped.startswith("#!"):
                    continue
                text = stripped.lstrip("#").strip()
                if text:
                    return text
    except OSError:
        pass
    return name


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class ScriptTool(Tool):
    """A :class:`~robotlab.tools.Tool` that runs an executable script; build one with :meth:`from_path`.

    Attributes:
        script: The script's path.
        capabilities: What the skill declared (:class:`Capabilities`).
        skill_dir: The skill bundle's folder (the script's folder by default).
        executor: How scripts run; ``None`` (the class default) runs them directly with a timeout.
            Set it on the class to change every script tool, or on one tool.
    """

    description = "Run a script."
    parameters: ClassVar[dict[str, Any]] = {  # type: ignore[misc]
        "type": "object",
        "properties": {"args": {"type": "string", "description": "Optional command-line arguments"}},
        "required": [],
    }
    executor: Executor | None = None

    def __init__(
        self, script: str | Path, *, capabilities: Capabilities | None = None, skill_dir: str | Path | None = None
    ) -> None:
        super().__init__()
        path = Path(script)
        self.script = path
        self.name = _derive_name(path)
        self.description = _description(path, self.name)
        self.capabilities = capabilities if capabilities is not None else Capabilities()
        self.skill_dir = Path(skill_dir) if skill_dir is not None else path.parent

    @classmethod
    def from_path(
        cls,
        path: str | Path,
        capabilities: Capabilities | None = None,
        skill_dir: str | Path | None = None,
    ) -> ScriptTool | None:
        """A tool for the script at ``path``, or ``None`` (with the warning ``"ScriptTool.

        <basename> is not executable, skipping"``) when it is not an executable file.
        """
        script = Path(path)
        if not (script.is_file() and os.access(script, os.X_OK)):
            logger.warning("ScriptTool: %s is not executable, skipping", script.name)
            return None
        return cls(script, capabilities=capabilities, skill_dir=skill_dir)

    def command(self, args: str | None = None) -> list[str]:
        """``["bash", <script>, *shlex.split(args)]``: the argument list a call runs."""
        text = (args or "").strip()
        try:
            extra = shlex.split(text) if text else []
        except ValueError as exc:
            raise ToolError(f"args could not be split like shell arguments: {exc}") from None
        return ["bash", str(self.script), *extra]

    async def execute(self, args: object = None) -> Any:
        """Run the script with ``args`` through :attr:`executor`, else directly with the grant's timeout."""
        if args is not None and not isinstance(args, str):
            raise ToolError(f"args must be a string of command-line arguments, got {type(args).__name__}")
        cmd = self.command(args)
        # read without binding: a function set on the class is not a method of the tool
        executor = self.__dict__["executor"] if "executor" in self.__dict__ else type(self).executor
        if executor is not None:
            result = executor(cmd, capabilities=self.capabilities, skill_dir=str(self.skill_dir))
            return await result if inspect.isawaitable(result) else result
        grant = self.capabilities.intersect(Capabilities.ceiling())
        output, returncode = await self.run_command(cmd, timeout=grant.timeout)
        return format_result(output, returncode)

    @staticmethod
    async def run_command(cmd: Sequence[str], *, timeout: float) -> tuple[str, int | None]:
        """Run ``cmd`` (no shell, stdin closed, its own process group) for at most ``timeout`` seconds.

        Returns the first :data:`MAX_OUTPUT_CHARS` characters of stdout and stderr combined, and the exit
        code, or ``None`` when the process group was killed at the timeout (the output then ends with
        ``"[killed: exceeded <timeout>s]"``). A cancelled call kills the process group too.
        """
        with tempfile.TemporaryFile() as sink:
            process = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=sink, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            returncode: int | None
            try:
                async with asyncio.timeout(timeout):
                    returncode = await process.wait()
            except TimeoutError:
                _kill_group(process)
                await process.wait()
                returncode = None
            except BaseException:
                _kill_group(process)
                await asyncio.shield(process.wait())
                raise
            size = os.fstat(sink.fileno()).st_size
            sink.seek(0)
            raw = sink.read(MAX_OUTPUT_CHARS * 4)  # a UTF-8 character takes at most 4 bytes
        output = raw.decode("utf-8", errors="replace")
        if len(output) > MAX_OUTPUT_CHARS or size > len(raw):
            output = output[:MAX_OUTPUT_CHARS] + f"\n[output truncated at {MAX_OUTPUT_CHARS} characters]"
        if returncode is None:
            output = f"{output}\n[killed: exceeded {timeout:g}s]"
        return output, returncode

    def to_dict(self) -> dict[str, Any]:
        """``name``, ``description`` and ``script``."""
        return {**super().to_dict(), "script": str(self.script)}
