"""Ruby behaviour that RobotLab's ported messages and rules depend on, in one place.

RobotLab is a Ruby library; where its observable output depends on how Ruby prints a number,
strips a string, quotes a value or wraps a value in a list, the port calls these helpers so the
texts and rules come out word for word. Private: the public modules re-export what they document
(``robotlab.text_analysis.format_number`` and ``ruby_strip``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from numbers import Real
from typing import Any

__all__ = ["array", "format_number", "inspect_string", "puts", "strip"]

#: What Ruby's ``String#strip`` removes: ASCII whitespace and NUL.
_STRIPPED = " \t\n\v\f\r\x00"

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\t": "\\t",
    "\r": "\\r",
    "\f": "\\f",
    "\v": "\\v",
    "\b": "\\b",
    "\a": "\\a",
    "\x1b": "\\e",
}


def format_number(value: object) -> str:
    """``value`` as Ruby's ``to_s`` renders it, for error messages ported word for word.

    ``10`` -> ``"10"``, ``0.5`` -> ``"0.5"``, ``10.0`` -> ``"10.0"``, ``1e-05`` -> ``"1.0e-05"``,
    ``inf`` -> ``"Infinity"``, ``nan`` -> ``"NaN"``; anything else is ``str(value)``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        return str(value)
    if isinstance(value, int):
        return str(int(value))
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    text = repr(number)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        text = f"{mantissa}e{exponent}"
    return text


def strip(text: str) -> str:
    """``text`` without leading/trailing ASCII whitespace and NUL, like Ruby's ``String#strip``."""
    return text.strip(_STRIPPED)


def inspect_string(text: str) -> str:
    """``text`` in double quotes, escaped as Ruby's ``String#inspect`` does."""
    out = []
    for index, char in enumerate(text):
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char == "#" and text[index + 1 : index + 2] in ("{", "$", "@"):
            out.append("\\#")
        elif char == "\x7f":
            out.append("\\x7F")
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def array(value: object) -> list[Any]:
    """Ruby's ``Array(value)``: ``None`` -> ``[]``, a list -> its items, anything else -> ``[value]``.

    Strings, bytes and mappings count as single values. (Ruby's ``Array`` would split a Hash
    into ``[key, value]`` pairs, which is never what an MCP server config wants, so a dict
    stays whole here.) Any other iterable, a tuple, a set, a generator or a
    :class:`~robotlab.ToolManifest`, contributes its items. The result is always a new list.
    """
    if value is None:
        return []
    if isinstance(value, str | bytes | bytearray | Mapping):
        return [value]
    if isinstance(value, Iterable):
        return list(value)
    return [value]


def puts(lines: Iterable[str]) -> str:
    """What Ruby's ``puts`` writes for ``lines``: each line once, ending in exactly one newline."""
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
