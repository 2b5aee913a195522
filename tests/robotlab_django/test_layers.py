"""The app's layers: every import of ``robotlab_django`` (function-level ones too) points down, and none cycles.

Read from the source with :mod:`ast`, so an import inside a function counts like one at the top.
A failure names the offending import (``module:line imports target``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.parsing import parse

PACKAGE = "robotlab_django"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

#: The layers, lowest first: the app's packages, and a package's module where it sits lower than the rest of it
#: (a module belongs to the longest entry that names it or a package above it). A module may import its own layer
#: and those below it, never one above.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"conf", "chat.csp", "encoders", "runs.attachments", "runs.step_writer", "runs.sync_bridge",
                    "scaffolding.naming", "storable", "streaming.streamed_text", "templatetags",
                    "workers.redis_broker"}),
    ("models and registry", {"abstract_models", "accounting.models", "checks", "evals.models", "models",
                             "protocols.push_models", "registry",
                             "scaffolding", "swappable", "runs.deps", "versions.models", "workers.presence"}),
    ("storage", {"accounting", "chat.access", "chat.revocation", "networks.graph", "privacy.retention",
                 "protocols.tokens", "runs.approvals", "runs.checkpoints", "runs.effects", "runs.history",
                 "runs.records", "runs.transcript", "runs.user_errors", "streaming.broadcast", "tracing", "versions"}),
    ("event stream", {"networks.task_events", "networks.turn", "runs.watch", "streaming"}),
    ("units of work", {"networks", "runs.claims", "runs.runnables", "runs.steering", "runs.thread_queue"}),
    ("execution", {"runs.runner"}),
    ("celery", {"tasks", "workers"}),
    ("dispatch", {"runs.executor"}),
    ("services", {"evals", "privacy", "protocols", "runs", "services", "tools"}),
    ("entry points", {"", "a2a", "acp", "admin", "agui", "apps", "asgi", "chat", "management", "mcp", "routing",
                      "urls"}),
]

#: Imports that the layers would allow but the design does not: (importer, imported, why).
FORBIDDEN = [
    ("chat.consumers", "chat.views", "the websocket takes what it shares with the pages from access"),
    ("chat.socket_frames", "chat.views", "the websocket takes what it shares with the pages from access"),
]

#: The modules of the app's models: ``models`` and the ones it imports its concepts' models from.
MODEL_MODULES = {"abstract_models", "models", "accounting.models", "evals.models", "protocols.push_models",
                 "versions.models"}

#: Only these modules may import ``robotlab_django.tasks`` (the Celery task): the one dispatcher.
DISPATCHERS = {"runs.executor"}

#: What the chat pages must not import: a model implementation (they ask conf which LLM the app uses).
MODEL_IMPLEMENTATIONS = ("robotlab.demo", "robotlab.testing", "robotlab.llm", "litellm")


@dataclass(frozen=True)
class Import:
    """One import statement of a module: who imports what, where."""

    importer: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{PACKAGE}.{self.importer or '__init__'}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[Import]:
    """Every import in ``path`` (absolute names), at any depth of the module."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if name == "":
        package = []
    found = []
    for node in ast.walk(parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = [PACKAGE, *package][:len(package) + 2 - node.level]
                stem = ".".join([*base, *([node.module] if node.module else [])])
                targets = [stem] if node.module else [f"{stem}.{alias.name}" for alias in node.names]
            else:  # ``from robotlab_django import conf`` imports the module ``conf`` (``_known`` finds the module)
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [Import(name, target, node.lineno) for target in targets]
        elif isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
    return found


def _all_imports() -> list[Import]:
    return [found for path in sorted(ROOT.rglob("*.py")) if "migrations" not in path.parts
            for found in _imports(path)]


def _internal(target: str) -> str | None:
    """The app module ``target`` names (``""`` for the package), or ``None`` outside the app."""
    if target == PACKAGE:
        return ""
    if not target.startswith(f"{PACKAGE}."):
        return None
    return target[len(PACKAGE) + 1:]


def _layer(module: str) -> int:
    """The index of ``module``'s layer: that of the longest entry naming it or a package above it."""
    parts = module.split(".")
    for candidate in [".".join(parts[:end]) for end in range(len(parts), 0, -1)] if module else [""]:
        for index, (_name, members) in enumerate(LAYERS):
            if candidate in members:
                return index
    raise AssertionError(f"{PACKAGE}.{module} is in no layer: add it to LAYERS in {Path(__file__).name}")


def _known(module: str) -> str:
    """``module`` itself when it is a module of the app, else its parent (``from . import x`` of a name)."""
    candidate = module
    while candidate and not (ROOT / f"{candidate.replace('.', '/')}.py").exists() and not (
            ROOT / candidate.replace(".", "/") / "__init__.py").exists():
        candidate = candidate.rpartition(".")[0]
    return candidate


def upward_imports(imports: list[Import]) -> list[str]:
    """The imports that point to a higher layer, or break a :data:`FORBIDDEN` rule, as messages."""
    problems = []
    for found in imports:
        target = _internal(found.target)
        if target is None:
            continue
        target = _known(target)
        if _layer(target) > _layer(found.importer):
            problems.append(f"{found} ({LAYERS[_layer(found.importer)][0]} may not import "
                            f"{LAYERS[_layer(target)][0]})")
        for importer, imported, why in FORBIDDEN:
            if found.importer == importer and target == imported:
                problems.append(f"{found}: {why}")
    return problems


def cycles(imports: list[Import]) -> list[str]:
    """Each import cycle among the app's modules, as ``a -> b -> a`` with the imports' lines."""
    edges: dict[str, dict[str, Import]] = {}
    for found in imports:
        target = _internal(found.target)
        if target is not None and _known(target) != found.importer:
            edges.setdefault(found.importer, {}).setdefault(_known(target), found)
    seen: set[tuple[str, ...]] = set()
    found_cycles = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(edges.get(module, {})):
            if target in path:
                loop = path[path.index(target):]
                key = tuple(sorted(loop))
                if key not in seen:
                    seen.add(key)
                    steps = [edges[a][b] for a, b in zip(loop, [*loop[1:], target], strict=True)]
                    found_cycles.append(" -> ".join([*loop, target]) + ": " + "; ".join(map(str, steps)))
            elif len(path) < 30:
                visit(target, [*path, target])

    for module in sorted(edges):
        visit(module, [module])
    return found_cycles


def test_every_app_module_is_in_a_layer() -> None:
    modules = {_module_name(path) for path in ROOT.rglob("*.py") if "migrations" not in path.parts}
    for module in sorted(modules):
        _layer(module)


def test_imports_point_down_the_layers() -> None:
    assert upward_imports(_all_imports()) == []


def test_there_is_no_import_cycle_in_the_app() -> None:
    assert cycles(_all_imports()) == []


def test_only_the_executor_sends_runs_to_celery() -> None:
    senders = [str(found) for found in _all_imports()
               if _internal(found.target) is not None and _known(_internal(found.target) or "") == "tasks"
               and found.importer not in DISPATCHERS]
    assert senders == []


def test_the_chat_pages_and_the_models_import_no_model_implementation_or_stream() -> None:
    imports = _all_imports()
    pages = [str(found) for found in imports if found.importer == "chat.views"
             and found.target.startswith(MODEL_IMPLEMENTATIONS)]
    assert pages == []
    models = [str(found) for found in imports if found.importer in MODEL_MODULES
              # storable: the field classes the models' columns are made of (Django only)
              and _known(_internal(found.target) or "") not in ("", "encoders", "storable", *MODEL_MODULES)]
    assert models == []


def test_the_checks_name_the_offending_import() -> None:
    """The checkers themselves catch an upward import, a forbidden one and a cycle, naming each."""
    bad = [Import("abstract_models", "robotlab_django.runs.runner", 3),
           Import("chat.consumers", "robotlab_django.chat.views", 7),
           Import("runs.runner", "robotlab_django.runs.executor", 11),
           Import("runs.executor", "robotlab_django.runs.runner", 12)]
    problems = upward_imports(bad)
    assert problems[0] == ("robotlab_django.abstract_models:3 imports robotlab_django.runs.runner "
                           "(models and registry may not import execution)")
    assert any(problem.startswith("robotlab_django.chat.consumers:7 imports robotlab_django.chat.views:")
               for problem in problems)
    assert cycles(bad) == ["runs.runner -> runs.executor -> runs.runner: robotlab_django.runs.runner:11 imports "
                           "robotlab_django.runs.executor; robotlab_django.runs.executor:12 imports "
                           "robotlab_django.runs.runner"]
    with pytest.raises(AssertionError, match="robotlab_django.nowhere is in no layer"):
        _layer("nowhere")


#: Issue 32: no module of the app over this many lines (migrations, Django's own numbering, aside).
MAX_LINES = 400
#: Issue 32: modules at the app's root, where Django looks for its own files.
MAX_ROOT_MODULES = 15


def test_no_app_module_is_over_the_line_limit() -> None:
    lengths = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in ROOT.rglob("*.py")
               if "migrations" not in path.parts}
    assert {name: length for name, length in lengths.items() if length > MAX_LINES} == {}


def test_the_apps_root_holds_few_modules() -> None:
    assert len(list(ROOT.glob("*.py"))) <= MAX_ROOT_MODULES
