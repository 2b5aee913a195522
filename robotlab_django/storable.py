"""Text every database stores: NUL characters and lone surrogates replaced, the same way on SQLite and PostgreSQL.

A model's reply, tool-call arguments, a user's message or a file name may hold characters a database cannot store:
PostgreSQL refuses a NUL (``\\u0000``) in a text column and in ``jsonb``, and neither backend's driver can encode a
lone surrogate (``\\ud800``) as UTF-8. :func:`storable` replaces each with U+FFFD (a surrogate pair becomes the one
character it encodes), in a string or, recursively, in a JSON value (its keys too).

It is applied where values reach the database: the app's models use :class:`StorableCharField`,
:class:`StorableTextField` and :class:`StorableJSONField`, whose ``get_prep_value`` calls it, so a ``save()``, a
``bulk_create()``, an ``update()`` and a lookup all see the same text. They migrate as Django's own fields (no
migration), so a project's copies of the models (``manage.py robotlab_install --models``) get them by subclassing
the abstract bases.

:class:`CostField`, the app's other column type, reads a cost without its trailing zeros.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["REPLACEMENT", "CostField", "StorableCharField", "StorableJSONField", "StorableTextField", "storable",
           "storable_text"]

#: What replaces a character no database stores.
REPLACEMENT = "\ufffd"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with each NUL and each lone surrogate replaced by U+FFFD; a surrogate pair joined into its character.

    ``storable_text("a\\x00b")`` is ``"a\\ufffdb"``; text without either is returned as it is (the same object).
    """
    if _UNSTORABLE.search(text) is None:
        return text
    if _SURROGATE.search(text) is not None:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", REPLACEMENT)


def storable(value: object) -> Any:
    """``value`` with :func:`storable_text` applied to every string in it: a string, or a JSON value recursively.

    Dict keys are strings too; lists and tuples come back as lists (JSON has no tuples), other values as they are.
    A dict or list with nothing to replace comes back as it is (the same object, tuples inside it kept: its JSON
    text, made at C speed, says so), so a large value (a network turn's state) is not rebuilt on every write.
    """
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict | list) and _clean(value):
        return value
    return _storable(value)


def _clean(value: object) -> bool:
    """Whether the JSON value ``value`` holds no string that :func:`storable_text` would change (``False``: unsure)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON as it is: walk it
        return False
    return _UNSTORABLE.search(text) is None and "\\u0000" not in text  # a NUL is written as the escape


def _storable(value: object) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(key) if isinstance(key, str) else key: _storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(item) for item in value]
    return value


if TYPE_CHECKING:  # django-stubs' generic fields (not subscriptable at run time)
    _CharField = models.CharField[Any, str]
    _TextField = models.TextField[Any, str]
    _JSONField = models.JSONField[Any, Any]
    _DecimalField = models.DecimalField[Decimal, Decimal]
else:
    _CharField, _TextField, _JSONField = models.CharField, models.TextField, models.JSONField
    _DecimalField = models.DecimalField


class StorableCharField(_CharField):
    """A ``CharField`` storing :func:`storable_text`; it migrates as ``django.db.models.CharField``."""

    def get_prep_value(self, value: object) -> Any:
        """The value as Django prepares it, made storable."""
        value = super().get_prep_value(value)
        return storable_text(value) if isinstance(value, str) else value

    def deconstruct(self) -> Any:
        """Deconstruct as ``django.db.models.CharField``: no migration."""
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class StorableTextField(_TextField):
    """A ``TextField`` storing :func:`storable_text`; it migrates as ``django.db.models.TextField``."""

    def get_prep_value(self, value: object) -> Any:
        """The value as Django prepares it, made storable."""
        value = super().get_prep_value(value)
        return storable_text(value) if isinstance(value, str) else value

    def deconstruct(self) -> Any:
        """Deconstruct as ``django.db.models.TextField``: no migration."""
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class StorableJSONField(_JSONField):
    """A ``JSONField`` storing :func:`storable` values; it migrates as ``django.db.models.JSONField``.

    A value its encoder turns into text (:class:`~robotlab_django.encoders.RobotLabJSONEncoder`'s ``str()`` of any
    other object) is made storable by the encoder.
    """

    def get_prep_value(self, value: object) -> Any:
        """The value as Django prepares it, every string in it made storable."""
        return storable(super().get_prep_value(value))

    def deconstruct(self) -> Any:
        """Deconstruct as ``django.db.models.JSONField``: no migration."""
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class CostField(_DecimalField):
    """A ``DecimalField`` whose values read without trailing zeros: ``Decimal('0')``, not ``Decimal('0E-8')``.

    The column keeps 8 decimal places; only the Python value is normalized, so ``print(result.cost)`` shows
    ``0`` or ``0.0025``. It migrates as a plain ``DecimalField``.
    """

    def from_db_value(self, value: Decimal | float | str | None, expression: object,
                      connection: BaseDatabaseWrapper) -> Decimal | None:
        """The stored value without its trailing zeros (an integral value without an exponent)."""
        if value is None:
            return None
        number = Decimal(value)
        return number.quantize(Decimal(1)) if number == number.to_integral_value() else number.normalize()

    def deconstruct(self) -> Any:
        """Deconstruct as ``django.db.models.DecimalField``: no migration for the normalization."""
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.DecimalField", args, kwargs
