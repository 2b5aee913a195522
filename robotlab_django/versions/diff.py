"""Two versions side by side: their prompts and settings compared line by line (:mod:`difflib`), as plain rows.

The admin renders the rows into a table, escaping every cell; nothing here makes HTML.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from robotlab_django.models import RobotVersion
from robotlab_django.versions.parts import settings_of

__all__ = ["DiffRow", "diff_versions", "side_by_side"]


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff: ``tag`` is ``equal``, ``replace``, ``delete`` or ``insert``."""

    tag: str
    left: str
    right: str


def side_by_side(left: str, right: str) -> list[DiffRow]:
    """``left`` and ``right`` compared line by line, aligned: a missing line is ``""``."""
    old, new = left.splitlines(), right.splitlines()
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        removed, added = old[i1:i2], new[j1:j2]
        for index in range(max(len(removed), len(added))):
            rows.append(DiffRow(tag, removed[index] if index < len(removed) else "",
                                added[index] if index < len(added) else ""))
    return rows


def _settings_text(version: RobotVersion) -> str:
    return json.dumps(settings_of(version), indent=2, sort_keys=True, ensure_ascii=False)


def diff_versions(old: RobotVersion | None, new: RobotVersion) -> dict[str, list[DiffRow]]:
    """``{"prompt": rows, "settings": rows}``: ``new`` against ``old`` (``None``: against nothing)."""
    return {"prompt": side_by_side(old.prompt if old else "", new.prompt),
            "settings": side_by_side(_settings_text(old) if old else "", _settings_text(new))}
