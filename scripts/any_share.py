#!/usr/bin/env python3
"""Print, per package, the share of function parameters typed ``Any``; CI prints it (``scripts/test``).

What counts, read from the source with :mod:`ast` (nothing is imported):

* every parameter of every function and method (``def``, ``async def``, nested ones too; lambdas cannot be
  annotated and are left out): positional-only, positional, keyword-only, ``*args`` and ``**kwargs``;
* but not a method's ``self`` or ``cls`` (the first parameter of a function defined in a class body, unless
  it is a ``@staticmethod``);
* a parameter is typed ``Any`` when its annotation is ``Any`` itself (``Any``, ``typing.Any``, ``"Any"``), an
  alias of it, or a union that holds either (``Any | None``, ``Optional[Any]``): the checker is told nothing about
  it. An alias is a module-level ``Name = Any``, ``Name: TypeAlias = Any``, ``Name = TypeAliasType("Name", Any)``
  or ``type Name = Any`` anywhere in the package (or such a union, or an alias of an alias), and typeshed's
  ``Incomplete``; it counts wherever its name is used, imported or not. A container of ``Any``
  (``dict[str, Any]``, or an alias of one) is not: the parameter's own type is checked. Such parameters are shown
  in a column of their own;
* ``*args: Any`` and ``**kwargs: Any`` count as one parameter each, typed ``Any`` (they let any argument, or
  any keyword, through); the share without them is printed too.

Usage: ``python scripts/any_share.py [--max PERCENT] [PACKAGE ...]`` (default: ``robotlab robotlab_django``).
With ``--max``, exit 1 when a package's share is above ``PERCENT``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("robotlab", "robotlab_django")


@dataclass
class Share:
    """The parameter counts of one package."""

    parameters: int = 0
    any_typed: int = 0
    variadic: int = 0
    variadic_any: int = 0
    any_inside: int = 0
    unannotated: int = 0

    @property
    def percent(self) -> float:
        """The share of parameters typed ``Any``, in percent."""
        return 100.0 * self.any_typed / self.parameters if self.parameters else 0.0

    @property
    def percent_fixed(self) -> float:
        """The same share, ``*args`` and ``**kwargs`` left out."""
        fixed = self.parameters - self.variadic
        return 100.0 * (self.any_typed - self.variadic_any) / fixed if fixed else 0.0


def _annotation(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except (SyntaxError, ValueError, UnicodeError):  # plain text, not a type
            return node
    return node


#: Names that mean ``Any`` before any alias of the package: itself, and typeshed's ``Incomplete``.
ANY_NAMES = frozenset({"Any", "Incomplete"})


def _is_any(node: ast.expr, names: frozenset[str] = ANY_NAMES) -> bool:
    """Whether the annotation is ``Any`` (or one of ``names``, its aliases), or a union that holds it."""
    node = _annotation(node)
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr in names
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_any(node.left, names) or _is_any(node.right, names)
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] in ("Optional", "Union",
                                                                                      "Annotated"):
        inner = node.slice
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        if ast.unparse(node.value).split(".")[-1] == "Annotated":
            parts = parts[:1]  # Annotated[T, metadata...] is T
        return any(_is_any(part, names) for part in parts)
    return False


def _alias_values(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """Each module-level type alias candidate of ``tree``: ``(its name, the value it names)``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if (isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "TypeAliasType"
                    and len(value.args) >= 2):
                value = value.args[1]
            if isinstance(value, ast.Name | ast.Attribute | ast.Subscript | ast.BinOp | ast.Constant):
                yield node.targets[0].id, value  # what may be a type (a call is not, but for TypeAliasType)
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None
              and ast.unparse(node.annotation).split(".")[-1] == "TypeAlias"):
            yield node.target.id, node.value
        elif type(node).__name__ == "TypeAlias":  # ``type Name = ...`` (Python 3.12)
            yield node.name.id, node.value  # type: ignore[attr-defined]


def any_aliases(trees: list[ast.Module]) -> frozenset[str]:
    """The names that mean ``Any`` in these modules: :data:`ANY_NAMES` and every alias of them, to a fixed point."""
    return _closure(trees, ANY_NAMES, _is_any)


def holding_aliases(trees: list[ast.Module], names: frozenset[str]) -> frozenset[str]:
    """``names`` and the aliases in these modules of a type that holds one of them (``Rows = list[Row]``)."""
    return _closure(trees, names, _holds_any)


def _closure(trees: list[ast.Module], names: frozenset[str],
             test: Callable[[ast.expr, frozenset[str]], bool]) -> frozenset[str]:
    candidates = [pair for tree in trees for pair in _alias_values(tree)]
    while True:
        found = names | {name for name, value in candidates if test(value, names)}
        if found == names:
            return names
        names = found


def _holds_any(node: ast.expr, names: frozenset[str] = ANY_NAMES) -> bool:
    """Whether ``Any`` (or one of ``names``) appears anywhere in the annotation."""
    node = _annotation(node)
    return any((isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
               or (n is not node and isinstance(n, ast.Constant) and isinstance(n.value, str)
                   and _holds_any(n, names))
               for n in ast.walk(node))


def _functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function of the module, with whether it is a method taking ``self`` or ``cls`` first."""

    def visit(node: ast.AST, in_class: bool) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                static = any(ast.unparse(d).split(".")[-1] == "staticmethod" for d in child.decorator_list)
                yield child, in_class and not static
                yield from visit(child, False)
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, True)
            else:
                yield from visit(child, in_class)

    yield from visit(tree, False)


def measure(package: Path) -> Share:
    """The parameter counts of the package at ``package``."""
    share = Share()
    paths = [path for path in sorted(package.rglob("*.py")) if "migrations" not in path.relative_to(package).parts]
    trees = [ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in paths]
    names = any_aliases(trees)
    holding = holding_aliases(trees, names)
    for tree in trees:
        for function, is_method in _functions(tree):
            args = function.args
            positional = [*args.posonlyargs, *args.args]
            if is_method and positional and positional[0].arg in ("self", "cls", "mcs"):
                positional = positional[1:]
            fixed = [*positional, *args.kwonlyargs]
            variadic = [arg for arg in (args.vararg, args.kwarg) if arg is not None]
            for arg in [*fixed, *variadic]:
                share.parameters += 1
                share.variadic += arg in variadic
                if arg.annotation is None:
                    share.unannotated += 1
                elif _is_any(arg.annotation, names):
                    share.any_typed += 1
                    share.variadic_any += arg in variadic
                elif _holds_any(arg.annotation, holding):
                    share.any_inside += 1
    return share


def main(argv: list[str] | None = None) -> int:
    """Print the table; with ``--max``, fail when a package is above it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=list(PACKAGES))
    parser.add_argument("--max", type=float, default=None, help="fail above this share (percent)")
    options = parser.parse_args(argv)
    print(f"{'package':<18}{'parameters':>11}{'Any':>7}{'share':>8}{'*/** Any':>10}{'share w/o */**':>16}"
          f"{'Any inside':>12}{'unannotated':>13}")
    failed = False
    for name in options.packages:
        share = measure(ROOT / name)
        print(f"{name:<18}{share.parameters:>11}{share.any_typed:>7}{share.percent:>7.1f}%{share.variadic_any:>10}"
              f"{share.percent_fixed:>15.1f}%{share.any_inside:>12}{share.unannotated:>13}")
        failed |= options.max is not None and share.percent > options.max
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
