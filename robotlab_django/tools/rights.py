"""Who a model tool acts for, which rows that user sees, and what they may do: :class:`ModelRights`.

The rows a user sees: ``scope(queryset, user)`` when a scope is given, else the rows whose ``owner_field`` is the
user, else all rows; and only with the model's ``view`` permission, or, without it, only the rows the user owns
by ``owner_field``. A write needs the model's ``add`` / ``change`` / ``delete`` permission as well. Every refusal
is a :class:`~robotlab.errors.ToolError` in plain words, for the model to read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_permission_codename, get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from robotlab.errors import ToolError
from robotlab.run_context import RunContext

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

__all__ = ["ModelRights", "Scope"]

#: ``scope(queryset, user)``: the rows of ``queryset`` that ``user`` may see.
Scope = Callable[[models.QuerySet[Any], Any], models.QuerySet[Any]]

#: What each action is called in a refusal.
_VERBS = {"view": "see", "add": "add", "change": "change", "delete": "delete"}


@dataclass(frozen=True)
class ModelRights:
    """The rules of one model's tools: whose rows, under which permissions.

    Attributes:
        model: The model.
        owner_field: The name of the foreign key to the user model that says whose a row is, or ``None``.
        scope: ``scope(queryset, user)``, the rows a user sees, or ``None``.
    """

    model: type[models.Model]
    owner_field: str | None = None
    scope: Scope | None = None

    def __post_init__(self) -> None:
        if self.owner_field is None:
            return
        field = self.model._meta.get_field(self.owner_field)
        if not (field.many_to_one or field.one_to_one) or field.related_model is not get_user_model():
            raise ImproperlyConfigured(f"model_tools: owner_field '{self.owner_field}' of {self.model._meta.label} "
                                       "must be a foreign key to the user model")

    @property
    def plural(self) -> str:
        """The model's plural name, as refusals say it."""
        return str(self.model._meta.verbose_name_plural)

    def user(self, context: RunContext[Any]) -> Any:
        """The active, signed-in user the run is for (``ctx.deps.user``, a :class:`~robotlab_django.RunDeps`'s).

        Raises:
            ToolError: the run has no user (no deps, an anonymous visitor), or the user is inactive.
        """
        user = getattr(context.deps, "user", None)
        if user is None or not getattr(user, "is_authenticated", False):
            raise ToolError(f"refused: {self.plural} are only for a signed-in user, and this run is for none")
        if not getattr(user, "is_active", False):
            raise ToolError(f"refused: the run's user is inactive, so {self.plural} are not theirs to use")
        return user

    def permission(self, action: str) -> str:
        """The full name of the model's permission for ``action`` (``notes.add_note``)."""
        opts = self.model._meta
        return f"{opts.app_label}.{get_permission_codename(action, opts)}"

    def may(self, user: _User, action: str) -> bool:
        """Whether ``user`` has the model's permission for ``action`` (``view``, ``add``, ``change``, ``delete``)."""
        return bool(user.has_perm(self.permission(action)))

    def require(self, user: _User, action: str) -> None:
        """Refuse unless ``user`` has the model's permission for ``action``.

        Raises:
            ToolError: the user lacks it.
        """
        if not self.may(user, action):
            outcome = "" if action == "view" else "; nothing was changed"
            raise ToolError(f"refused: you may not {_VERBS[action]} {self.plural} (this needs the permission "
                            f"{self.permission(action)}){outcome}")

    def rows(self, user: _User) -> models.QuerySet[Any]:
        """The rows ``user`` sees (database work: call it from a thread that may block).

        Raises:
            ToolError: the user may see none: no ``view`` permission and no ``owner_field`` to own rows by.
            TypeError: the scope did not return a queryset of the model.
        """
        viewer = self.may(user, "view")
        if not viewer and self.owner_field is None:
            self.require(user, "view")
        rows = self.model._default_manager.all()
        if self.scope is not None:
            rows = self.scope(rows, user)
            if not isinstance(rows, models.QuerySet) or rows.model is not self.model:
                raise TypeError(f"model_tools: the scope of {self.model._meta.label} must return a queryset of it, "
                                f"not {rows!r}")
        elif self.owner_field is not None:
            rows = rows.filter(**{self.owner_field: user})
        if not viewer and self.owner_field is not None:  # without the permission: only the rows they own
            rows = rows.filter(**{self.owner_field: user})
        return rows

    def visible(self, user: _User, pk: object) -> bool:
        """Whether the row ``pk`` is among the rows ``user`` sees (database work)."""
        return bool(self.rows(user).filter(pk=pk).exists())
