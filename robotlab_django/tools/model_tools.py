"""Robot tools on a Django model, under the run's user's rights: :func:`model_tools`.

::

    from robotlab_django.tools import model_tools

    robot = robotlab.build(name="notes", local_tools=model_tools(
        Note, fields=["title", "status", "due"], owner_field="owner", write=True))

gives ``search_note``, ``get_note`` and, with ``write=True``, ``create_note``, ``update_note`` and
``delete_note``: ordinary robotlab tools that read the run's user from ``ctx.deps.user`` (a
:class:`~robotlab_django.RunDeps`), see only that user's rows (:class:`~robotlab_django.tools.rights.ModelRights`),
filter and write only the listed fields, and answer every refusal with a tool error in plain words, writing
nothing. Their database work runs through :func:`robotlab_django.runs.sync_bridge.blocking`, off the robot's
loop.

The write tools have side effects: an app run journals each call (:mod:`robotlab_django.runs.effects`), and the
write and its journal row commit in one transaction, so a write is never repeated and never of unknown outcome.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ValidationError
from django.db import IntegrityError, models, router, transaction

from robotlab.errors import ToolError
from robotlab.run_context import RunContext, current_run_context
from robotlab.tools import Tool
from robotlab.tools.schema import snake_case

from ..runs import effects
from ..runs.sync_bridge import blocking
from . import schemas
from .queries import SearchQuery, search_query
from .rights import ModelRights, Scope
from .values import Changes, changes, json_value, python_value, row, validation_text, write_values

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

__all__ = ["ModelTool", "model_tools"]

#: What a tool's :meth:`~ModelTool.prepare` makes of its arguments, and its :meth:`~ModelTool.perform` takes.
PreparedT = TypeVar("PreparedT")


@contextlib.contextmanager
def _writing(model: type[models.Model]) -> Iterator[None]:
    """One transaction for a write; a validation or database error inside it becomes a refusal, rolled back."""
    try:
        with transaction.atomic(using=router.db_for_write(model)):
            yield
    except ValidationError as exc:
        raise ToolError(f"not saved: {validation_text(exc)}") from None
    except IntegrityError as exc:
        raise ToolError(f"the database refused the change ({exc}); nothing was changed") from None


class ModelTool(Tool, Generic[PreparedT]):
    """A tool on one model's rows that acts for the run's user: the base of the tools :func:`model_tools` makes.

    A subclass reads the model's arguments in :meth:`prepare` (no database work) and does the work in
    :meth:`perform`, which runs where the app's database work runs
    (:func:`~robotlab_django.runs.sync_bridge.blocking`).
    """

    #: The tool's verb, the start of its name (``search``, ``get``, ``create``, ``update``, ``delete``).
    action = ""

    def __init__(self, *, rights: ModelRights, fields: Sequence[models.Field[Any, Any]],
                 writes: Sequence[models.Field[Any, Any]], noun: str, max_rows: int, approve: bool) -> None:
        super().__init__()
        self.rights = rights
        self.fields = tuple(fields)
        self.writes = tuple(writes)
        self.max_rows = max_rows
        self.model = rights.model
        self.name = f"{self.action}_{noun}"
        self.side_effect = self.action in {"create", "update", "delete"}
        #: Whether a journaled call's write commits with its effect row (the model lives in the journal's database).
        self.commits_effect = self.side_effect and effects.shares_database(self.model)
        self.approve = approve and self.side_effect
        self.description = self.describe()
        self.parameters = self.schema()

    @property
    def singular(self) -> str:
        """The model's name, as the descriptions say it."""
        return str(self.model._meta.verbose_name)

    @property
    def pk(self) -> models.Field[Any, Any]:
        """The model's primary key."""
        pk = self.model._meta.pk
        assert pk is not None  # a concrete model has one
        return pk

    def describe(self) -> str:
        """The tool's description."""
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments."""
        return schemas.key_schema(self.model)

    def prepare(self, arguments: Mapping[str, Any]) -> Any:
        """The model's arguments, checked and as Python values (the primary key by default).

        Raises:
            ToolError: an argument this tool does not take, or a value that is not one of its field.
        """
        unknown = [name for name in arguments if name != self.pk.name]
        if unknown:
            raise ToolError(f"unknown argument '{unknown[0]}': {self.name} takes only {self.pk.name}")
        return python_value(self.pk, arguments.get(self.pk.name), where=self.pk.name)

    def perform(self, user: _User, prepared: PreparedT) -> Any:
        """Do the work for ``user`` (database work, in a thread that may block) and return what the model reads."""
        raise NotImplementedError

    def visible_row(self, user: _User, pk: object) -> models.Model | None:
        """The row ``pk`` as stored, with its related rows, if ``user`` sees it, else ``None`` (database work)."""
        related = [field.name for field in self.fields if field.is_relation]
        return self.rights.rows(user).select_related(*related).filter(pk=pk).first()

    def missing(self, pk: object) -> ToolError:
        """The refusal for a row the user does not see (whether it exists or not: that is not theirs to learn)."""
        return ToolError(f"there is no {self.singular} with {self.pk.name} {pk} among the "
                         f"{self.rights.plural} you may see")

    async def execute(self, context: RunContext[Any], /, **arguments: object) -> Any:
        """Check the run's user and the arguments, then :meth:`perform` off the robot's loop."""
        user = self.rights.user(context)
        prepared = self.prepare(arguments)
        call = effects.current_call()
        if self.commits_effect and call is not None and call.tool is self:
            return await blocking(self.perform_journaled, user, prepared, call)
        return await blocking(self.perform, user, prepared)

    def perform_journaled(self, user: _User, prepared: PreparedT, call: effects.EffectCall) -> Any:
        """:meth:`perform`, and the journaled ``call`` marked completed, in one transaction (database work)."""
        with transaction.atomic(using=router.db_for_write(self.model)):
            value = self.perform(user, prepared)
            call.complete(value)
        return value

    async def approval_details(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What a write changes, for the person who approves it: ``{"changes": [{"field", "before", "after"}]}``.

        The same checks as the write itself come first (the user, the arguments, the permission, the row), so a
        write that would be refused is refused before anyone is asked.
        """
        context = current_run_context()
        if context is None:
            raise ToolError(f"{self.name} acts for the run's user: call it in a robot's run")
        user = self.rights.user(context)
        prepared = self.prepare(arguments)
        return {"changes": await blocking(self.propose, user, prepared)}

    def propose(self, user: _User, prepared: PreparedT) -> list[dict[str, Any]]:
        """The changes a write would make for ``user`` (database work; :func:`~.values.changes`)."""
        return []


class SearchTool(ModelTool[SearchQuery]):
    """``search_<model>``: the rows the user sees, filtered on the listed fields, sorted, a page of them."""

    action = "search"

    def describe(self) -> str:
        """Which filters, what comes back."""
        names = ", ".join(field.name for field in self.fields)
        return (f"Search the {self.rights.plural} you may see. Filter on {names}: 'field' for an exact value, "
                "and where the field allows 'field__icontains', 'field__gte', 'field__lte', 'field__in'. "
                f"Returns the total count and up to {self.max_rows} rows; a related row is shown as its pk and str.")

    def schema(self) -> dict[str, Any]:
        """Filters, ``order_by``, ``limit`` and ``offset``."""
        return schemas.search_schema(self.fields, max_rows=self.max_rows)

    def prepare(self, arguments: Mapping[str, Any]) -> Any:
        """The search's query (:func:`~robotlab_django.tools.queries.search_query`)."""
        return search_query(self.fields, arguments, max_rows=self.max_rows)

    def perform(self, user: _User, prepared: SearchQuery) -> dict[str, Any]:
        """``{"total", "offset", "rows"}``."""
        rows = self.rights.rows(user).filter(**prepared.filters)
        total = rows.count()
        related = [field.name for field in self.fields if field.is_relation]
        page = rows.select_related(*related).order_by(*prepared.ordering)[
            prepared.offset:prepared.offset + prepared.limit]
        return {"total": total, "offset": prepared.offset, "rows": [row(item, self.fields) for item in page]}


class GetTool(ModelTool[object]):
    """``get_<model>``: one row the user sees, by its primary key."""

    action = "get"

    def describe(self) -> str:
        """By primary key."""
        return f"One {self.singular} you may see, by its {self.pk.name}."

    def perform(self, user: _User, prepared: object) -> dict[str, Any]:
        """The row."""
        instance = self.visible_row(user, prepared)
        if instance is None:
            raise self.missing(prepared)
        return row(instance, self.fields)


class CreateTool(ModelTool[Changes]):
    """``create_<model>``: a new row from the listed fields, owned by the user when the model has an owner."""

    action = "create"

    def describe(self) -> str:
        """What may be set."""
        owned = " owned by you" if self.rights.owner_field else ""
        return (f"Create a {self.singular}{owned}. Only these fields can be set: "
                f"{', '.join(field.name for field in self.writes)}. Returns the new row.")

    def schema(self) -> dict[str, Any]:
        """The writable fields."""
        return schemas.create_schema(self.writes)

    def prepare(self, arguments: Mapping[str, Any]) -> Any:
        """``[(field, value)]`` of the fields to set."""
        return write_values(self.writes, arguments, self.rights.plural)

    def propose(self, user: _User, prepared: Changes) -> list[dict[str, Any]]:
        """The fields set, from nothing."""
        self.rights.require(user, "add")
        self.rights.rows(user)
        return changes(None, self.fields, prepared)

    def perform(self, user: _User, prepared: Changes) -> dict[str, Any]:
        """The new row, validated (``full_clean``) and saved in one transaction."""
        self.rights.require(user, "add")
        self.rights.rows(user)  # and the user may see rows: a write needs both
        with _writing(self.model):
            instance = self.model(**{field.attname: value for field, value in prepared})
            if self.rights.owner_field is not None:
                setattr(instance, self.rights.owner_field, user)
            instance.full_clean()
            instance.save()
            saved = self.visible_row(user, instance.pk)
            if saved is None:
                raise ToolError(f"refused: the new {self.singular} would not be among the {self.rights.plural} "
                                "you may see; nothing was saved")
        return row(saved, self.fields)


class UpdateTool(ModelTool[tuple[object, Changes]]):
    """``update_<model>``: change listed fields of one row the user sees."""

    action = "update"

    def describe(self) -> str:
        """What may be changed."""
        return (f"Change one {self.singular} you may see, by its {self.pk.name}: give only the fields to change, "
                f"among {', '.join(field.name for field in self.writes)}. Returns the changed row.")

    def schema(self) -> dict[str, Any]:
        """The primary key and the writable fields."""
        return schemas.update_schema(self.model, self.writes)

    def prepare(self, arguments: Mapping[str, Any]) -> Any:
        """``(pk, [(field, value)])``."""
        if self.pk.name not in arguments:
            raise ToolError(f"{self.pk.name}: which {self.singular} to change is missing")
        changes = write_values(self.writes, {k: v for k, v in arguments.items() if k != self.pk.name},
                           self.rights.plural)
        if not changes:
            raise ToolError(f"nothing to change: give at least one of {', '.join(f.name for f in self.writes)}")
        return python_value(self.pk, arguments[self.pk.name], where=self.pk.name), changes

    def propose(self, user: _User, prepared: tuple[object, Changes]) -> list[dict[str, Any]]:
        """The fields given, before and after."""
        pk, values = prepared
        self.rights.require(user, "change")
        instance = self.visible_row(user, pk)
        if instance is None:
            raise self.missing(pk)
        return changes(instance, self.fields, values)

    def perform(self, user: _User, prepared: tuple[object, Changes]) -> dict[str, Any]:
        """The changed row, validated (``full_clean``) and saved in one transaction."""
        pk, changes = prepared
        self.rights.require(user, "change")
        with _writing(self.model):
            if not self.rights.visible(user, pk):
                raise self.missing(pk)
            instance = self.model._default_manager.select_for_update().get(pk=pk)
            for field, value in changes:
                setattr(instance, field.attname, value)
            instance.full_clean()
            stamped = [field.name for field in self.model._meta.concrete_fields if getattr(field, "auto_now", False)]
            instance.save(update_fields=[*(field.name for field, _value in changes), *stamped])
            saved = self.visible_row(user, pk)
            if saved is None:
                raise ToolError(f"refused: after this change the {self.singular} would no longer be among the "
                                f"{self.rights.plural} you may see; nothing was changed")
        return row(saved, self.fields)


class DeleteTool(ModelTool[object]):
    """``delete_<model>``: delete one row the user sees."""

    action = "delete"

    def describe(self) -> str:
        """By primary key."""
        return f"Delete one {self.singular} you may see, by its {self.pk.name}."

    def propose(self, user: _User, prepared: object) -> list[dict[str, Any]]:
        """The listed fields, to nothing."""
        self.rights.require(user, "delete")
        instance = self.visible_row(user, prepared)
        if instance is None:
            raise self.missing(prepared)
        return changes(instance, self.fields, None)

    def perform(self, user: _User, prepared: object) -> dict[str, Any]:
        """``{"deleted": {pk: ..., "str": ...}}``."""
        self.rights.require(user, "delete")
        with _writing(self.model):
            if not self.rights.visible(user, prepared):
                raise self.missing(prepared)
            instance = self.model._default_manager.get(pk=prepared)
            deleted = {self.pk.name: json_value(instance.pk), "str": str(instance)}
            instance.delete()
        return {"deleted": deleted}


def _fields(model: type[models.Model], names: Sequence[str]) -> list[models.Field[Any, Any]]:
    if isinstance(names, str) or not names:
        raise ImproperlyConfigured("model_tools: fields must be a non-empty list of field names")
    found = []
    for name in dict.fromkeys(names):
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            raise ImproperlyConfigured(f"model_tools: {model._meta.label} has no field '{name}'") from None
        if not isinstance(field, models.Field) or not field.concrete:
            raise ImproperlyConfigured(f"model_tools: '{name}' of {model._meta.label} is not a column of it")
        schemas.kind(field)  # a field the tools support
        found.append(field)
    return found


def model_tools(model: type[models.Model], *, fields: Sequence[str], owner_field: str | None = None,
                scope: Scope | None = None, write: bool = False, approve: bool = True, max_rows: int = 50,
                name: str | None = None) -> list[Tool]:
    """The tools of ``model`` for a robot, acting for the run's user (``ctx.deps.user``).

    Args:
        model: The model.
        fields: The fields the tools show, filter on and (without the primary key, the owner and the fields
            Django sets itself) write. No other field is read or written.
        owner_field: A foreign key to the user model: a user sees the rows they own (unless ``scope`` says
            otherwise), may see them without the ``view`` permission, and owns the rows they create.
        scope: ``scope(queryset, user)``: the rows the user sees, instead of the ``owner_field`` rule.
        write: Also ``create_<model>``, ``update_<model>`` and ``delete_<model>``, which need the model's
            ``add``, ``change`` and ``delete`` permissions.
        approve: Mark the write tools as needing a person's approval (:attr:`robotlab.Tool.approve`).
        max_rows: The most rows one search returns.
        name: The noun in the tools' names (the model's name in snake_case by default: ``order_item``).

    Raises:
        ImproperlyConfigured: an unknown or unsupported field, an ``owner_field`` that is no foreign key to the
            user model, ``max_rows`` below 1.
    """
    if max_rows < 1:
        raise ImproperlyConfigured(f"model_tools: max_rows must be at least 1, not {max_rows}")
    shown = _fields(model, fields)
    rights = ModelRights(model, owner_field, scope)
    writes = [field for field in shown if schemas.writable(field) and field.name != owner_field]
    noun = name or snake_case(model._meta.object_name or model.__name__)
    kinds: list[type[ModelTool[Any]]] = [SearchTool, GetTool]
    if write:
        kinds += [CreateTool, UpdateTool, DeleteTool]
    return [kind(rights=rights, fields=shown, writes=writes, noun=noun, max_rows=max_rows, approve=approve)
            for kind in kinds]
