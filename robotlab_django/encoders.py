"""The JSON encoder of the app's JSON fields: Django's, plus ``str()`` for anything else.

Tool results may hold any Python value; storing a run must never fail because one of them is
not JSON (a ``set``, a custom object). Such values come back from the database as strings.
"""

from __future__ import annotations

from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from robotlab_django.storable import storable


class RobotLabJSONEncoder(DjangoJSONEncoder):
    """:class:`DjangoJSONEncoder` (dates, decimals, UUIDs) that falls back to ``str(value)``."""

    def default(self, o: object) -> Any:
        """Encode ``o`` as Django does, else as ``list`` for sets and ``str`` for the rest; storable text either way.

        The strings made here are made storable (:func:`robotlab_django.storable.storable`), as the JSON fields do
        with the value's own strings.
        """
        if isinstance(o, set | frozenset):
            return storable(sorted(o, key=repr))
        try:
            return storable(super().default(o))
        except TypeError:
            return storable(str(o))
