"""The JSON encoder of the app's JSON fields: Django's, plus ``str()`` for anything else.

Tool results may hold any Python value; storing a run must never fail because one of them is
not JSON (a ``set``, a custom object). Such values come back from the database as strings.
"""

from __future__ import annotations

from typing import Any

from django.core.serializers.json import DjangoJSONEncoder


class RobotLabJSONEncoder(DjangoJSONEncoder):
    """:class:`DjangoJSONEncoder` (dates, decimals, UUIDs) that falls back to ``str(value)``."""

    def default(self, o: Any) -> Any:
        """Encode ``o`` as Django does, else as ``list`` for sets and ``str`` for the rest."""
        if isinstance(o, set | frozenset):
            return sorted(o, key=repr)
        try:
            return super().default(o)
        except TypeError:
            return str(o)
