"""Approvals of tool calls in the app: which parked runs wait for one, who may decide, what a decision stores.

A robot of an app run has a :class:`robotlab.tools.approval.ParkingApprover` (:mod:`robotlab_django.runs.runnables`):
a call of an ``approve=True`` tool (every write tool of :func:`robotlab_django.tools.model_tools` unless
``approve=False``) parks the run before it runs, as a question does. The row is ``awaiting`` and its ``question`` is
the :class:`~robotlab.tools.approval.ApprovalRequest`: ``"type": "approval"``, the ``tool``, its ``arguments``, the
tool's ``details`` (a model tool's ``changes``, before and after), and the ``choices`` ``approve`` and ``deny``, so
every place that shows a parked question shows it (the chat page as a card, ACP and A2A as awaiting input, the
admin's list of :class:`~robotlab_django.models.ToolApproval`). The decision is answered like a question
(:func:`robotlab_django.runs.control.answer`, or :func:`~robotlab_django.runs.control.decide`): it joins the row's
``answers`` as a :func:`decision` entry, and the resumed run's approver finds it there.

Who may decide (:func:`may_approve`): the run's user (its thread's owner), or an active staff member with the
permission :data:`PERMISSION` (``robotlab.approve_toolcall``). Everything is in the database, so a parked approval
survives any restart of workers and web processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from robotlab.tools.approval import APPROVAL, approves
from robotlab_django import swappable
from robotlab_django.abstract_models import Status

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab_django.models import RobotResult

__all__ = ["PERMISSION", "decision", "decision_of", "is_approval", "may_approve", "owner_name", "waiting"]

#: The permission that lets staff approve or deny the tool calls of anyone's runs.
PERMISSION = "robotlab.approve_toolcall"


def is_approval(question: Mapping[str, Any] | None) -> bool:
    """Whether a row's ``question`` is a tool call waiting for approval (not a question to answer in words)."""
    return bool(question) and (question or {}).get("type") == APPROVAL


def waiting(rows: QuerySet[Any]) -> QuerySet[Any]:
    """The rows of ``rows`` parked on an approval (``awaiting``, their question of type ``approval``)."""
    return rows.filter(status=Status.AWAITING, question__type=APPROVAL)


def _owner_id(row: RobotResult) -> int | None:
    return swappable.thread_model().objects.filter(pk=row.thread_id).values_list("user_id", flat=True).first()


def may_approve(row: RobotResult, user: _AnyUser | None) -> bool:
    """Whether ``user`` may approve or deny ``row``'s tool calls.

    The run's user may (the owner of its thread); so may an active staff member with :data:`PERMISSION`. Nobody
    else: not another user, not an anonymous visitor, not staff without the permission.
    """
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return False
    owner = _owner_id(row)
    if owner is not None and owner == user.pk:
        return True
    return bool(getattr(user, "is_staff", False) and user.has_perm(PERMISSION))


def owner_name(row: RobotResult) -> str:
    """The user name of ``row``'s run's user (its thread's owner), ``""`` for an anonymous thread."""
    thread = swappable.thread_model().objects.select_related("user").filter(pk=row.thread_id).first()
    user = getattr(thread, "user", None)
    return "" if user is None else str(user.get_username())


def decision_of(text: str) -> bool | None:
    """An answer to an approval as a decision: ``True`` (approve), ``False`` (deny), ``None`` (neither).

    ``approve``/``yes``/``1`` approve and ``deny``/``no``/``2`` deny (:func:`robotlab.tools.approval.approves`).
    """
    return approves(text)


def decision(question: Mapping[str, Any], approved: bool, by: str) -> dict[str, Any]:
    """The ``answers`` entry of a decision on ``question`` (the row's pending approval).

    ``request_id``, ``question``, ``answer`` (``approve`` or ``deny``), ``by`` (who decided), and the call it
    decides (``type``, ``tool``, ``arguments``), which the resumed run's approver matches.
    """
    return {"request_id": question.get("request_id"), "question": question.get("question"),
            "answer": "approve" if approved else "deny", "by": by, "type": APPROVAL,
            "tool": question.get("tool"), "arguments": question.get("arguments") or {}}
