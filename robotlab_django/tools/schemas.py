"""JSON schemas from Django fields: what the model sees of a model's columns, its filters and its writes.

Every field a model tool lists has a *kind* (:func:`kind`), the JSON shape of its values: an integer, a number, a
decimal written as text, a boolean, a string (a date, a time, a uuid ... as text with a ``format``) or any JSON.
A foreign key's kind is its target's: the model reads and writes a related row by its primary key. The schema of
a value (:func:`value_schema`) adds the field's choices (``enum``), ``maxLength``, its declared bounds and
``null``; the filters a kind allows are :func:`lookups`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

__all__ = ["KINDS", "create_schema", "key_schema", "kind", "lookups", "search_schema", "update_schema",
           "value_schema", "writable"]

#: The kind of each Django field type (``Field.get_internal_type()``) model tools support.
KINDS: dict[str, str] = {
    **dict.fromkeys(("AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                     "SmallIntegerField", "PositiveIntegerField", "PositiveBigIntegerField",
                     "PositiveSmallIntegerField"), "integer"),
    "FloatField": "number",
    "DecimalField": "decimal",
    "BooleanField": "boolean",
    **dict.fromkeys(("CharField", "TextField", "SlugField", "EmailField", "URLField", "GenericIPAddressField"),
                    "string"),
    "DateField": "date",
    "DateTimeField": "datetime",
    "TimeField": "time",
    "DurationField": "duration",
    "UUIDField": "uuid",
    "JSONField": "json",
}

#: The JSON schema of each kind's values.
_SHAPES: dict[str, dict[str, Any]] = {
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "decimal": {"type": "string", "format": "decimal", "pattern": r"^-?\d+(\.\d+)?$"},
    "boolean": {"type": "boolean"},
    "string": {"type": "string"},
    "date": {"type": "string", "format": "date"},
    "datetime": {"type": "string", "format": "date-time"},
    "time": {"type": "string", "format": "time"},
    "duration": {"type": "string", "description": "as [DD] [HH:[MM:]]ss[.uuuuuu]"},
    "uuid": {"type": "string", "format": "uuid"},
    "json": {},
}

#: The filters (Django lookups) each kind allows, besides ``exact``.
_LOOKUPS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("integer", "number", "decimal", "date", "datetime", "time", "duration"), ("gte", "lte", "in")),
    "string": ("icontains", "in"),
    "uuid": ("in",),
    "boolean": (),
}


def _target(field: models.Field[Any, Any]) -> models.Field[Any, Any]:
    """The field whose values ``field`` holds: a foreign key's target field, else ``field`` itself."""
    if isinstance(field, models.ForeignKey):
        return field.target_field
    return field


def kind(field: models.Field[Any, Any]) -> str:
    """The kind of ``field``'s values (a key of :data:`KINDS`' values).

    Raises:
        ImproperlyConfigured: a field model tools cannot show or write (a many-to-many, a file, binary data).
    """
    found = KINDS.get(_target(field).get_internal_type())
    if found is None or field.many_to_many or field.one_to_many:
        raise ImproperlyConfigured(
            f"model_tools: the field '{field.name}' of {field.model._meta.label} is a "
            f"{type(field).__name__}, which model tools do not support")
    return found


def lookups(field: models.Field[Any, Any]) -> tuple[str, ...]:
    """The filters the model may use on ``field``.

    ``exact`` and those of its kind; a field with choices or a foreign key has ``exact`` and ``in``; a JSON field
    none.
    """
    found = kind(field)
    if found == "json":
        return ()
    if field.is_relation or field.choices:
        return ("exact", "in")
    return ("exact", *_LOOKUPS[found])


def _bounds(field: models.Field[Any, Any]) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    if _target(field).get_internal_type().startswith("Positive"):
        bounds["minimum"] = 0
    for validator in getattr(field, "_validators", ()):  # the declared ones, not the database's integer range
        if isinstance(validator, MinValueValidator) and not callable(validator.limit_value):
            bounds["minimum"] = validator.limit_value
        elif isinstance(validator, MaxValueValidator) and not callable(validator.limit_value):
            bounds["maximum"] = validator.limit_value
    return bounds if kind(field) in {"integer", "number"} else {}


def value_schema(field: models.Field[Any, Any], *, nullable: bool | None = None, described: bool = True) -> dict[
        str, Any]:
    """The JSON schema of one value of ``field``.

    Args:
        field: The model field.
        nullable: Whether ``null`` is allowed (``field.null`` by default).
        described: Whether to add the field's description (its verbose name, help text, choices' labels).
    """
    schema = dict(_SHAPES[kind(field)])
    notes = [schema.pop("description")] if "description" in schema else []
    target = _target(field)
    if isinstance(target, models.CharField) and target.max_length and not field.is_relation:
        schema["maxLength"] = target.max_length
    schema.update(_bounds(field))
    if field.choices and not field.is_relation:
        choices = [(value, str(label)) for value, label in field.flatchoices]
        schema["enum"] = [value for value, _label in choices]
        schema.pop("maxLength", None)  # the choices say it all
        if any(str(value) != label for value, label in choices):
            notes.append("one of " + ", ".join(f"{value} ({label})" for value, label in choices))
    if field.is_relation and field.related_model is not None:
        related = field.related_model._meta
        notes.append(f"the {related.pk.name if related.pk else 'id'} of a {related.verbose_name}")
    if nullable if nullable is not None else field.null:
        if "type" in schema:
            schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    if described:
        words = [str(field.verbose_name), str(field.help_text or "").rstrip("."), *notes]
        schema["description"] = "; ".join(word for word in words if word)
    return schema


def writable(field: models.Field[Any, Any]) -> bool:
    """Whether a write tool may set ``field``.

    An editable, concrete field that is not the primary key and is not set by Django itself (``auto_now``,
    ``auto_now_add``).
    """
    return bool(field.concrete and field.editable and not field.primary_key
                and not getattr(field, "auto_now", False) and not getattr(field, "auto_now_add", False))


def _object(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def key_schema(model: type[models.Model]) -> dict[str, Any]:
    """The arguments of a tool that names one row: its primary key."""
    pk = model._meta.pk
    assert pk is not None  # a concrete model has one
    return _object({pk.name: value_schema(pk, nullable=False, described=False)}, [pk.name])


def search_schema(fields: Sequence[models.Field[Any, Any]], *, max_rows: int) -> dict[str, Any]:
    """The arguments of a search.

    One filter per listed field and lookup (``status``, ``title__icontains``, ``due__gte``, ``priority__in`` ...),
    ``order_by``, ``limit`` (at most ``max_rows``) and ``offset``.
    """
    properties: dict[str, Any] = {}
    for field in fields:
        label = str(field.verbose_name)
        for lookup in lookups(field):
            if lookup == "exact":
                properties[field.name] = value_schema(field)
            elif lookup == "icontains":
                properties[f"{field.name}__icontains"] = {
                    "type": "string", "description": f"{label} contains this text (ignoring case)"}
            elif lookup == "in":
                properties[f"{field.name}__in"] = {
                    "type": "array", "items": value_schema(field, nullable=False, described=False),
                    "description": f"{label} is one of these"}
            else:
                words = "at least" if lookup == "gte" else "at most"
                properties[f"{field.name}__{lookup}"] = {
                    **value_schema(field, nullable=False, described=False), "description": f"{label} is {words}"}
    orders = [name for field in fields if kind(field) != "json" for name in (field.name, f"-{field.name}")]
    if orders:
        properties["order_by"] = {"type": "string", "enum": orders,
                                  "description": "the field to sort by, with '-' first for descending"}
    properties["limit"] = {"type": "integer", "minimum": 1, "maximum": max_rows, "default": min(20, max_rows),
                           "description": f"how many rows to return (at most {max_rows})"}
    properties["offset"] = {"type": "integer", "minimum": 0, "default": 0,
                            "description": "how many matching rows to skip first"}
    return _object(properties)


def create_schema(fields: Sequence[models.Field[Any, Any]]) -> dict[str, Any]:
    """The arguments of a create: the writable fields, those without a default and not blank required."""
    writes = [field for field in fields if writable(field)]
    return _object({field.name: value_schema(field) for field in writes},
                   [field.name for field in writes if not field.blank and not field.has_default()])


def update_schema(model: type[models.Model], fields: Sequence[models.Field[Any, Any]]) -> dict[str, Any]:
    """The arguments of an update: the primary key, and the writable fields to change (each optional)."""
    key = key_schema(model)
    changes = {field.name: value_schema(field) for field in fields if writable(field)}
    return _object({**key["properties"], **changes}, key["required"])
