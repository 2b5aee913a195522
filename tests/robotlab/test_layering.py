"""The shape of the core, checked statically: no import cycle, a ``Robot`` made of parts, short modules.

The import graph is read from the source with :mod:`ast`, so imports inside functions count as
much as those at the top of a module (a function-level import hides a cycle from Python, not from
a reader). Imports under ``if TYPE_CHECKING:`` are left out: they never run, and annotations may
name a class that refers back (``Tool.robot`` is a :class:`~robotlab.Robot`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Set
from pathlib import Path

from tests.parsing import parse

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "robotlab"

#: The module of the ``Robot`` class.
ROBOT_MODULE = "robotlab.robot.core"
#: The most core modules outside its own package the ``Robot`` class's module may import (at runtime, anywhere).
ROBOT_IMPORT_BUDGET = 8
#: The longest a module of the core may be.
MAX_LINES = 400


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return hidden


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: Set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    for alias in node.names:  # ``from . import hooks`` imports the module robotlab.hooks, not robotlab
        submodule = f"{target}.{alias.name}"
        yield submodule if submodule in modules else target


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``{module: the modules of the package it imports at runtime}``, function-level imports included."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = parse(path.read_text(), str(path))
        hidden = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in hidden:
                continue
            for target in _imported(name, path.name == "__init__.py", node, modules.keys()):
                while target and target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or ``None`` when the graph has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_the_core_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph(ROOT, PACKAGE))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_sees_cycles_through_function_level_imports_but_not_type_checking_ones(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def later():\n    from .c import thing\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
    (package / "c.py").write_text("def later():\n    from .a import x\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_robot_imports_few_core_modules() -> None:
    package = ROBOT_MODULE.rsplit(".", 1)[0]
    imported = sorted(m for m in import_graph(ROOT, PACKAGE)[ROBOT_MODULE] if not m.startswith(package + "."))
    assert len(imported) <= ROBOT_IMPORT_BUDGET, f"{ROBOT_MODULE} imports {len(imported)} core modules: {imported}"


def modules_over(limit: int) -> dict[str, int]:
    """The modules of the core longer than ``limit`` lines, with their lengths."""
    lengths = {name: len(path.read_text().splitlines()) for name, path in module_files(ROOT, PACKAGE).items()}
    return {name: length for name, length in sorted(lengths.items()) if length > limit}


def test_no_core_module_is_over_the_line_limit() -> None:
    assert modules_over(MAX_LINES) == {}
