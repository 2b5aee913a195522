"""``scripts/any_share.py`` counts what its docstring says: parameters typed ``Any``, per package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "any_share.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("any_share", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["any_share"] = module
    spec.loader.exec_module(module)
    return module


def test_the_counting_rules(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "migrations").mkdir(parents=True)
    (package / "migrations" / "0001.py").write_text("def skipped(a: Any) -> None: ...\n")
    (package / "__init__.py").write_text(
        "from typing import Any, Optional\n"
        "import typing\n"
        "def f(a: Any, b: int, /, c: Any | None, *args: Any, d: Optional[Any], e: dict[str, Any], **kw: Any):\n"
        "    def inner(x: typing.Any, y: 'Any') -> None: ...\n"
        "class C:\n"
        "    def method(self, a: int) -> None: ...\n"
        "    @classmethod\n"
        "    def make(cls, a: Any) -> None: ...\n"
        "    @staticmethod\n"
        "    def helper(self: Any) -> None: ...\n"
        "    def bare(self, b) -> None: ...\n"
    )
    share = _script().measure(package)
    # f: a, b, c, args, d, e, kw (7); inner: x, y; method: a; make: a; helper: self; bare: b -> 13
    # typed Any: a, c, args, d, kw, x, y, make's a, helper's self -> 9
    assert (share.parameters, share.any_typed, share.variadic, share.variadic_any) == (13, 9, 2, 2)
    assert (share.any_inside, share.unannotated) == (1, 1)
    assert round(share.percent, 1) == 69.2 and round(share.percent_fixed, 1) == 63.6


def test_it_fails_above_the_maximum_asked() -> None:
    script = _script()
    assert script.main(["robotlab"]) == 0
    assert script.main(["robotlab", "--max", "0"]) == 1


def test_an_alias_of_any_counts_as_any_wherever_it_is_used(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "types.py").write_text(
        "from typing import Annotated, Any, TypeAlias\n"
        "from typing_extensions import TypeAliasType\n"
        "Row = Any\n"
        "Json: TypeAlias = 'dict[str, Any] | Any'\n"
        "Value = TypeAliasType('Value', Row | None)\n"
        "Loose = Annotated[Value, 'loose']\n"
        "Named: TypeAlias = dict[str, Row]\n"
        "Precise: TypeAlias = int | str\n"
    )
    (package / "use.py").write_text(
        "from pkg.types import Json, Loose, Named, Precise, Row, Value\n"
        "from pkg import types\n"
        "def f(a: Row, b: Json, c: Value, d: 'Loose', e: types.Row,\n"
        "      g: Named, h: Precise, i: 'list[Row]') -> None: ...\n"
    )
    share = _script().measure(package)
    # typed Any: a, b, c, d, e; holding it: g (an alias of dict[str, Row]), i; h is precise
    assert (share.parameters, share.any_typed, share.any_inside) == (8, 5, 2)
    assert _script().any_aliases([]) == frozenset({"Any", "Incomplete"})
