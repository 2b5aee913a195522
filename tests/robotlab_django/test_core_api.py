"""The app uses only the core's public API: no private module of ``robotlab``, no private or unexported name.

Read from the source with :mod:`ast`, so imports inside functions count. A name imported from a core module must
be in that module's ``__all__`` (or be one of its public submodules); a module or name whose path has a part
starting with ``_`` is private (``robotlab._loop``, ``robotlab.llm._litellm``, ``robotlab.tools._x``), and so is
a dotted string naming one (``import_module("robotlab._runtime")``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import robotlab_django

APP = Path(robotlab_django.__file__).resolve().parent
ROOT = APP.parent


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _submodule(module: str, name: str) -> bool:
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except ModuleNotFoundError:
        return False


def reach_ins(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line what`` for each use of the core's private API in the module at ``path`` (named from ``root``)."""
    found: list[str] = []
    where = path.relative_to(root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno} import {alias.name}" for alias in node.names
                      if alias.name.split(".")[0] == "robotlab" and _private(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "robotlab":
            module = node.module or ""
            if _private(module):
                found.append(f"{where}:{node.lineno} from {module} import ...")
                continue
            exported = set(getattr(importlib.import_module(module), "__all__", ()))
            found += [f"{where}:{node.lineno} from {module} import {alias.name} (not in its __all__)"
                      for alias in node.names
                      if alias.name not in exported and (_private(alias.name) or not _submodule(module, alias.name))]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            chain = ast.unparse(node)
            if chain.split(".")[0] == "robotlab":
                found.append(f"{where}:{node.lineno} {chain}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith("robotlab.") and " " not in text and _private(text):
                found.append(f"{where}:{node.lineno} {text!r}")
    return found


def test_the_app_imports_only_the_cores_public_api() -> None:
    found = [line for path in sorted(APP.rglob("*.py")) for line in reach_ins(path)]
    assert found == [], "the app reaches into robotlab's private API; make the name public there:\n" + "\n".join(found)


def test_the_check_sees_each_kind_of_reach_in(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "import robotlab._record\n"
        "from robotlab.runtime import get_loop, shared\n"
        "from robotlab import tools, _ruby\n"
        "def later():\n"
        "    from robotlab._loop import run_loop\n"
        "    import robotlab\n"
        "    return robotlab._settings, 'robotlab._runtime'\n",
        encoding="utf-8",
    )
    found = reach_ins(module, tmp_path)
    assert [line.split(" ", 1)[1] for line in found] == [
        "import robotlab._record",
        "from robotlab.runtime import shared (not in its __all__)",
        "from robotlab import _ruby (not in its __all__)",
        "from robotlab._loop import ...",
        "robotlab._settings",
        "'robotlab._runtime'",
    ], found
