"""Writing scaffolds: render ``scaffolds/*-tpl`` templates, plan the files, write them safely.

The commands ``robotlab_install``, ``startrobot`` and ``startrobotjob`` build a list of
:class:`PlannedFile` and hand it to :func:`write_files`, which checks every file first: when one
exists with other content and ``force`` is not given, nothing at all is written. Files marked
``keep_existing`` (package ``__init__.py`` files, tool stubs) are created when missing and
otherwise left as they are.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps
from django.template import Context, Engine

from robotlab.errors import RobotLabError
from robotlab_django.scaffolding import naming

__all__ = [
    "SCAFFOLDS",
    "AppTarget",
    "Outcome",
    "PlannedFile",
    "ScaffoldError",
    "describe",
    "find_robot_apps",
    "has_pytest_config",
    "py_literal",
    "render",
    "resolve_app",
    "write_files",
]

#: Where the scaffold templates live.
SCAFFOLDS = Path(__file__).resolve().parent / "scaffolds"

_engine = Engine(dirs=[str(SCAFFOLDS)], autoescape=False, string_if_invalid="<MISSING {%s}>")


class ScaffoldError(RobotLabError):
    """A scaffold cannot be written as asked (the commands turn it into ``CommandError``)."""


def py_literal(text: str) -> str:
    """``text`` as a Python string literal, double-quoted unless it holds only double quotes (as ruff formats)."""
    if '"' in text and "'" not in text:
        return repr(text)
    return json.dumps(text, ensure_ascii=False)


def render(template: str, context: dict[str, Any]) -> str:
    """Render ``scaffolds/<template>-tpl`` with ``context`` (no HTML escaping: it is source code)."""
    text = _engine.get_template(f"{template}-tpl").render(Context(context, autoescape=False))
    if "<MISSING {" in text:  # pragma: no cover - a bug in a template, caught by the command tests
        raise ScaffoldError(f"Scaffold {template} used an unknown variable: {text}")
    return text


@dataclass(frozen=True)
class PlannedFile:
    """A file a command means to write."""

    path: Path
    content: str
    keep_existing: bool = False
    """Create the file when missing; an existing one is kept whatever it holds."""


@dataclass(frozen=True)
class Outcome:
    """What happened (or would happen) to a planned file.

    ``create``, ``overwrite``, ``unchanged``, ``kept`` (it existed and is kept), ``conflict`` (it exists, differs,
    and ``force`` was not given) or ``remove`` (the empty ``tests.py`` of ``startapp``, which the ``tests/`` package
    replaces).
    """

    path: Path
    action: str


#: What ``startapp`` writes in ``tests.py``: no tests, so the generated ``tests/`` package may replace it.
STARTAPP_TESTS = "from django.test import TestCase\n\n# Create your tests here.\n"


def _shadowed_tests_modules(files: list[PlannedFile], root: Path) -> list[Path]:
    """The ``tests.py`` modules a planned ``tests/`` package would collide with.

    Both cannot exist: ``manage.py test`` fails with "'tests' module incorrectly imported" and pytest
    silently runs only one. ``startapp``'s empty module is removed; one with tests of its own is an error.
    """
    modules = {planned.path.parent.parent / "tests.py" for planned in files
               if planned.path.name == "__init__.py" and planned.path.parent.name == "tests"}
    found = sorted(module for module in modules if module.is_file())
    for module in found:
        if module.read_text(encoding="utf-8").strip() != STARTAPP_TESTS.strip():
            where = _relative(module, root)
            raise ScaffoldError(f"Not writing anything: {where} holds tests, and the generated tests/ package "
                                f"would shadow it. Move it to {where[:-3]}/test_app.py (keep the name "
                                "test_*.py) and run the command again.")
    return found


def _plan(files: list[PlannedFile], force: bool) -> list[Outcome]:
    outcomes = []
    for planned in files:
        if not planned.path.exists():
            action = "create"
        elif planned.path.is_dir():
            action = "conflict"
        elif planned.keep_existing:
            action = "kept"
        elif planned.path.read_text(encoding="utf-8") == planned.content:
            action = "unchanged"
        else:
            action = "overwrite" if force else "conflict"
        outcomes.append(Outcome(planned.path, action))
    return outcomes


def write_files(files: list[PlannedFile], *, root: Path, force: bool = False, dry_run: bool = False) -> list[Outcome]:
    """Write ``files``, all or nothing.

    Raises:
        ScaffoldError: some file exists with other content and ``force`` is false, or a planned
            ``tests/`` package would shadow a ``tests.py`` with tests in it (nothing is written, in a
            dry run too).
    """
    outcomes = _plan(files, force)
    conflicts = [outcome.path for outcome in outcomes if outcome.action == "conflict"]
    if conflicts:
        listed = ", ".join(_relative(path, root) for path in conflicts)
        raise ScaffoldError(f"Not writing anything: {listed} already exist(s) with other content. "
                            "Use --force to overwrite.")
    removed = _shadowed_tests_modules(files, root)
    if not dry_run:
        for planned, outcome in zip(files, outcomes, strict=True):
            if outcome.action in ("create", "overwrite"):
                planned.path.parent.mkdir(parents=True, exist_ok=True)
                planned.path.write_text(planned.content, encoding="utf-8")
        for module in removed:
            module.unlink()
    return outcomes + [Outcome(module, "remove") for module in removed]


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def describe(outcomes: list[Outcome], root: Path) -> list[str]:
    """One line per outcome: ``  create  chat/robots/support_robot.py``."""
    return [f"  {outcome.action:<9} {_relative(outcome.path, root)}" for outcome in outcomes]


# -- apps --------------------------------------------------------------------------------
@dataclass(frozen=True)
class AppTarget:
    """The Django app a scaffold goes into."""

    name: str
    """Its import path (``chat``, ``myproject.chat``)."""
    label: str
    path: Path
    installed: bool

    @property
    def exists(self) -> bool:
        """Whether its directory exists."""
        return self.path.is_dir()

    @property
    def has_robots(self) -> bool:
        """Whether it has a ``robots`` package."""
        return (self.path / "robots" / "__init__.py").is_file()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def resolve_app(name: str, project_root: Path, *, must_exist: bool = False) -> AppTarget:
    """The app called ``name``: an installed app (by label or import path), else ``<project>/<name>``.

    Raises:
        ScaffoldError: an invalid name; an installed app outside the project (a third-party
            package); a new name that is already an importable module elsewhere; or, with
            ``must_exist``, an app directory that does not exist.
    """
    for config in apps.get_app_configs():
        if name in (config.label, config.name):
            target = AppTarget(name=config.name, label=config.label, path=Path(config.path), installed=True)
            if not _inside(target.path, project_root):
                raise ScaffoldError(f"App '{name}' lives outside the project ({target.path}); scaffold into one "
                                    "of your own apps.")
            return target
    try:
        package = naming.app_name(name)
    except naming.InvalidNameError as exc:
        raise ScaffoldError(str(exc)) from exc
    target = AppTarget(name=package, label=package, path=project_root / package, installed=False)
    if not target.exists:
        if must_exist:
            raise ScaffoldError(f"App '{name}' not found: it is not installed and {target.path} does not exist. "
                                f"Create it with 'python manage.py robotlab_install --app {name}'.")
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            raise ScaffoldError(f"'{package}' conflicts with the name of an existing Python module "
                                f"({spec.origin or spec.submodule_search_locations}); choose another app name.")
    return target


def find_robot_apps(project_root: Path) -> list[AppTarget]:
    """The project's apps that have a ``robots`` package: installed ones, then directories of the project."""
    found: dict[Path, AppTarget] = {}
    for config in apps.get_app_configs():
        target = AppTarget(name=config.name, label=config.label, path=Path(config.path), installed=True)
        if target.has_robots and _inside(target.path, project_root):
            found[target.path.resolve()] = target
    if project_root.is_dir():
        for child in sorted(project_root.iterdir()):
            if child.resolve() in found or not child.name.isidentifier():
                continue
            target = AppTarget(name=child.name, label=child.name, path=child, installed=False)
            if target.has_robots:
                found[child.resolve()] = target
    return list(found.values())


def has_pytest_config(project_root: Path) -> str | None:
    """The file that configures pytest in ``project_root``, or ``None``."""
    if (project_root / "pytest.ini").is_file():
        return "pytest.ini"
    pyproject = project_root / "pyproject.toml"
    if pyproject.is_file() and "[tool.pytest.ini_options]" in pyproject.read_text(encoding="utf-8"):
        return "pyproject.toml"
    for name, section in (("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        path = project_root / name
        if path.is_file():
            parser = configparser.ConfigParser()
            try:
                parser.read(path, encoding="utf-8")
            except configparser.Error:
                continue
            if parser.has_section(section):
                return name
    return None
