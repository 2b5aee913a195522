"""``ast.parse`` for the tests that read the source tree, safe from CPython 3.11's AST depth bug.

CPython 3.11 (up to 3.11.7, the version here) keeps the AST constructor's recursion depth in shared state. A garbage
collection during ``ast.parse`` can run a finalizer that formats a traceback (3.11 places its carets with ``ast``),
which re-enters the constructor and makes the outer parse raise ``SystemError: AST constructor recursion depth
mismatch`` (python/cpython#106905). A layers test failed that way late in a CI run. With the collector paused for
the parse, no finalizer runs inside it.
"""

from __future__ import annotations

import ast
import gc


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source)`` with the garbage collector paused."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if enabled:
            gc.enable()
