"""Values between the model's JSON and Django's fields: the arguments it sends, the rows it reads.

:func:`python_value` turns one JSON value into the field's Python value, or refuses it with a
:class:`~robotlab.errors.ToolError` that says why in plain words; :func:`row` turns a model instance into the
JSON the model reads (a foreign key as ``{"pk": ..., "str": ...}``); :func:`changes` says what a write changes, for
the person who approves it; :func:`validation_text` words a Django ``ValidationError`` (``full_clean``) for the
model.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.duration import duration_string

from robotlab.errors import ToolError

from .schemas import kind

__all__ = ["Changes", "changes", "json_value", "python_value", "row", "shown_value", "validation_text",
           "write_values"]

#: The ``(field, Python value)`` pairs a write sets.
Changes: TypeAlias = "list[tuple[models.Field[Any, Any], Any]]"

#: The JSON types each kind accepts (``bool`` is no number here, though Python says it is an ``int``).
_ACCEPTS: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "decimal": (str, int, float),
    "boolean": (bool,),
    **dict.fromkeys(("string", "date", "datetime", "time", "duration", "uuid"), (str,)),
}

_NAMES = {"integer": "an integer", "number": "a number", "decimal": "a decimal number",
          "boolean": "true or false", "date": "a date (YYYY-MM-DD)", "datetime": "a date and time (ISO 8601)",
          "time": "a time (HH:MM[:ss])", "duration": "a duration", "uuid": "a UUID", "string": "a string"}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def python_value(field: models.Field[Any, Any], value: object, *, where: str | None = None) -> Any:
    """``value`` (JSON from the model) as ``field``'s Python value; a foreign key's as its target's.

    Raises:
        ToolError: ``value`` is ``null`` for a field that is not nullable, has the wrong JSON type, is not one
            of the field's choices, or is no valid value of the field (an impossible date, a malformed UUID).
    """
    where = where or field.name
    if value is None:
        if field.null:
            return None
        raise ToolError(f"{where}: may not be null")
    found = kind(field)
    accepted = _ACCEPTS.get(found)
    if accepted is not None and (not isinstance(value, accepted) or (isinstance(value, bool) and found != "boolean")):
        raise ToolError(f"{where}: expected {_NAMES[found]}, got {_json_type(value)} {value!r}")
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    try:
        converted = target.to_python(value)
    except ValidationError as exc:
        raise ToolError(f"{where}: " + " ".join(exc.messages)) from None
    if field.choices and not field.is_relation and converted not in {choice for choice, _ in field.flatchoices}:
        allowed = ", ".join(str(choice) for choice, _ in field.flatchoices)
        raise ToolError(f"{where}: {value!r} is not one of {allowed}")
    if isinstance(converted, datetime.datetime) and settings.USE_TZ and timezone.is_naive(converted):
        converted = timezone.make_aware(converted)
    return converted


def json_value(value: object) -> Any:
    """A Python value of a field as JSON: dates and times in ISO 8601, decimals and UUIDs as text."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return duration_string(value)
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    return value


def row(instance: models.Model, fields: Sequence[models.Field[Any, Any]]) -> dict[str, Any]:
    """``instance`` as the model reads it: its primary key, then each of ``fields``.

    A foreign key is ``{"pk": <its primary key>, "str": <str() of the row>}``, ``None`` when unset.
    """
    pk = type(instance)._meta.pk
    assert pk is not None  # a concrete model has one
    shown: dict[str, Any] = {pk.name: json_value(instance.pk)}
    for field in fields:
        if field.is_relation:
            related = getattr(instance, field.name)
            shown[field.name] = None if related is None else {"pk": json_value(related.pk), "str": str(related)}
        else:
            shown[field.name] = json_value(getattr(instance, field.attname))
    return shown


def shown_value(field: models.Field[Any, Any], value: object) -> Any:
    """A Python value of ``field`` (a foreign key's: its target's) as a row shows it (:func:`row`)."""
    if not field.is_relation or value is None:
        return json_value(value)
    related = field.related_model._default_manager.filter(pk=value).first()  # type: ignore[union-attr]
    return {"pk": json_value(value), "str": "" if related is None else str(related)}


def changes(instance: models.Model | None, fields: Sequence[models.Field[Any, Any]],
            values: Sequence[tuple[models.Field[Any, Any], Any]] | None) -> list[dict[str, Any]]:
    """What a write changes, for the person who approves it: ``[{"field", "before", "after"}]``.

    ``instance`` is the row as stored (``None`` for a new row: every ``before`` is ``None``); ``values`` the
    ``(field, Python value)`` pairs written (``None`` for a deletion: every listed field's ``after`` is ``None``).
    """
    before = row(instance, fields) if instance is not None else {}
    if values is None:
        return [{"field": field.name, "before": before.get(field.name), "after": None} for field in fields]
    return [{"field": field.name, "before": before.get(field.name), "after": shown_value(field, value)}
            for field, value in values]


def validation_text(error: ValidationError) -> str:
    """A ``ValidationError`` in plain words: ``field: message`` for each field's errors, then the others."""
    if not hasattr(error, "error_dict"):
        return " ".join(error.messages)
    parts = []
    for name, messages in error.message_dict.items():
        text = " ".join(messages)
        parts.append(text if name == "__all__" else f"{name}: {text}")
    return "; ".join(parts)


def write_values(writes: Sequence[models.Field[Any, Any]], arguments: Mapping[str, Any], plural: str) -> Changes:
    """``[(field, python value)]`` for the fields ``arguments`` sets, refusing a field not among ``writes``.

    Raises:
        ToolError: a field that is not among ``writes`` (``plural`` names the rows in the message), or a value
            :func:`python_value` refuses.
    """
    allowed = {field.name: field for field in writes}
    changes = []
    for name, value in arguments.items():
        if name not in allowed:
            raise ToolError(f"unknown field '{name}': the fields of {plural} you may set are "
                            f"{', '.join(allowed) or 'none'}")
        changes.append((allowed[name], python_value(allowed[name], value)))
    return changes
