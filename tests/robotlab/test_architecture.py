"""The contributor's page is the map of the core, and the code keeps to it.

``docs/contributing.md`` lists every module of ``robotlab`` with what it owns, and the layers of the core
(a package counts as one unit). These tests read both tables from the page: a module missing from the map,
a listed module that is gone, or an import from a higher layer fails, naming what to fix.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.robotlab.test_layering import import_graph, module_files

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "contributing.md"
PACKAGE = "robotlab"


def _section(heading: str) -> list[str]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line.startswith("| ") and not line.startswith("|---")][1:]


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def mapped_modules() -> list[str]:
    """The module paths the page's module table lists, in order."""
    return [_cells(row)[0].strip("`") for row in _section("## Modules of the core")]


def layers() -> dict[str, int]:
    """``{unit: layer}`` from the page's layer table (a unit is a root module or a package)."""
    found: dict[str, int] = {}
    for row in _section("## Layers of the core"):
        number, _name, units = _cells(row)
        for unit in re.findall(r"`([^`]+)`", units):
            assert unit not in found, f"{unit} is in two layers of {PAGE.name}"
            found[unit] = int(number)
    return found


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def test_every_module_is_on_the_map_and_every_listed_one_exists() -> None:
    on_disk = {path.relative_to(ROOT).as_posix() for path in module_files(ROOT, PACKAGE).values()}
    listed = mapped_modules()
    twice = sorted({module for module in listed if listed.count(module) > 1})
    assert not twice, f"listed twice in {PAGE.name}: {twice}"
    missing = sorted(on_disk - set(listed))
    gone = sorted(set(listed) - on_disk)
    assert not missing, f"add these modules to the module table of {PAGE.relative_to(ROOT)}: {missing}"
    assert not gone, f"these modules listed in {PAGE.relative_to(ROOT)} no longer exist: {gone}"


def test_every_unit_has_a_layer() -> None:
    units = {_unit(module) for module in module_files(ROOT, PACKAGE)}
    assigned = layers()
    assert not units - set(assigned), f"give these a layer in {PAGE.name}: {sorted(units - set(assigned))}"
    assert not set(assigned) - units, f"these layered units no longer exist: {sorted(set(assigned) - units)}"


def climbing(graph: dict[str, set[str]], level: dict[str, int], package: str = PACKAGE) -> list[str]:
    """Each import of ``graph`` from a unit to a unit of a higher ``level``, as a sentence."""
    def unit(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else package

    return sorted(
        f"{module} (layer {level[unit(module)]}) imports {target} (layer {level[unit(target)]})"
        for module, targets in graph.items()
        for target in targets
        if target.startswith(package) and unit(target) != unit(module) and level[unit(target)] > level[unit(module)]
    )


def test_no_module_imports_a_higher_layer() -> None:
    found = climbing(import_graph(ROOT, PACKAGE), layers())
    assert not found, f"imports that climb the layers of {PAGE.name}:\n" + "\n".join(found)


def test_a_climbing_import_is_reported_and_a_descending_one_is_not(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "net").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("def f():\n    from .net import core\n")  # inside a function: still counted
    (package / "net" / "__init__.py").write_text("")
    (package / "net" / "core.py").write_text("from .. import errors\n")
    level = {"pkg": 0, "errors": 0, "net": 4}
    assert climbing(import_graph(tmp_path, "pkg"), level, "pkg") == [
        "pkg.errors (layer 0) imports pkg.net.core (layer 4)"
    ]
