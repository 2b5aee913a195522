from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import robotlab


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert robotlab.__all__ == sorted(robotlab.__all__)
    for name in robotlab.__all__:
        assert getattr(robotlab, name) is not None, name


def test_the_run_context_of_tools_is_public() -> None:
    from robotlab.run_context import RunContext

    assert "RunContext" in robotlab.__all__ and robotlab.RunContext is RunContext


def test_public_names_have_docstrings() -> None:
    missing = [
        name
        for name in robotlab.__all__
        if callable(getattr(robotlab, name)) and not (getattr(robotlab, name).__doc__ or "").strip()
    ]
    assert missing == []


def test_unknown_attribute_raises_attribute_error() -> None:
    try:
        robotlab.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_submodules_are_reachable_as_attributes() -> None:
    assert robotlab.config.get_config() is robotlab.get_config()
    assert robotlab.tool_config.NONE == "none"


def test_import_is_fast_and_loads_neither_litellm_nor_django() -> None:
    code = (
        "import sys, time, json; t = time.perf_counter(); import robotlab; elapsed = time.perf_counter() - t;"
        "print(json.dumps({'elapsed': elapsed, 'mods': [m for m in ('litellm', 'django', 'channels', 'celery')"
        " if m in sys.modules]}))"
    )
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    assert all(run["mods"] == [] for run in runs)
    assert min(run["elapsed"] for run in runs) < 0.3


def test_building_a_robot_does_not_import_litellm() -> None:
    code = (
        "import sys, robotlab; from robotlab.testing import FakeLLM;"
        "r = robotlab.build(llm=FakeLLM(['hi'])); assert r.run('x').reply == 'hi';"
        "print('litellm' in sys.modules, 'django' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["False", "False"]


def _type_checking_imports() -> dict[str, str]:
    """The ``if TYPE_CHECKING:`` imports of ``robotlab/__init__.py`` as ``{name: module}``."""
    tree = ast.parse(Path(robotlab.__file__).read_text(encoding="utf-8"))
    blocks = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    assert len(blocks) == 1
    found: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1 and node.module, ast.unparse(node)
        for alias in node.names:
            assert alias.asname is None, ast.unparse(node)
            found[alias.name] = node.module
    return found


def _type_checking_block(exports: dict[str, str]) -> str:
    by_module: dict[str, list[str]] = {}
    for name, module in exports.items():
        by_module.setdefault(module, []).append(name)
    lines = [f"    from .{module} import {', '.join(sorted(names))}" for module, names in sorted(by_module.items())]
    return "\n".join(lines)


def test_the_type_checking_imports_say_what_the_export_table_says() -> None:
    # One table (_EXPORTS) drives __all__ and the lazy loading; the TYPE_CHECKING block must agree with it.
    assert _type_checking_imports() == robotlab._EXPORTS, (
        "robotlab/__init__.py: make the TYPE_CHECKING block match _EXPORTS:\n" + _type_checking_block(robotlab._EXPORTS)
    )
    assert robotlab.__all__ == sorted(robotlab._EXPORTS), (
        "robotlab/__init__.py: make the literal __all__ the sorted names of _EXPORTS: "
        f"add {sorted(set(robotlab._EXPORTS) - set(robotlab.__all__))}, "
        f"remove {sorted(set(robotlab.__all__) - set(robotlab._EXPORTS))}"
    )


def test_every_exported_name_is_defined_in_the_module_the_table_names() -> None:
    for name, module in robotlab._EXPORTS.items():
        assert name in vars(importlib.import_module(f"robotlab.{module}")), (name, module)


def test_documented_module_paths_are_the_modules_themselves() -> None:
    import robotlab.text.analysis
    import robotlab.text_analysis
    import robotlab.tool_config
    import robotlab.tools.resolution

    assert robotlab.tool_config is robotlab.tools.resolution
    assert robotlab.text_analysis is robotlab.text.analysis
    assert robotlab.tool_config.resolve("inherit", parent_value=["a"]) == ["a"]
    assert robotlab.text_analysis.ruby_strip("\x00 x \n") == "x"


def _core_modules() -> list[str]:
    root = Path(robotlab.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_every_name_in_a_core_module_s_all_resolves_and_callables_say_what_they_are() -> None:
    problems = []
    for name in _core_modules():
        module = importlib.import_module(name)
        for exported in getattr(module, "__all__", ()):
            if not hasattr(module, exported):
                problems.append(f"{name}.{exported} is in __all__ but not defined")
                continue
            value = getattr(module, exported)
            if (inspect.isclass(value) or inspect.isfunction(value)) and not (value.__doc__ or "").strip():
                problems.append(f"{name}.{exported} has no docstring")
    assert problems == []
