"""Resolving a tool effect whose outcome is unknown: mark it done with a result, or retry it; the run goes on.

A run that met a ``started`` :class:`~robotlab_django.models.ToolEffect` (its worker died inside the tool) marked it
``unknown`` and parked (:mod:`robotlab_django.runs.effects`). A person who checked what happened outside resolves it:

* :func:`mark_done`: the effect happened; the model reads ``result`` as the tool's result and the tool is not called;
* :func:`retry`: it did not (or may happen again); the tool runs again when the run resumes.

Either resolution queues the parked run again (``hitl.resolved`` goes out, as for an answer), and any worker
resumes it from its checkpoints. An effect whose run no longer waits for it (cancelled, expired) is resolved all
the same; nothing is queued. Who may resolve: a user with the ``change`` permission of the tool effect model
(:func:`may_resolve`); the admin offers the actions to them only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_permission_codename
from django.db import transaction
from django.utils import timezone

from robotlab.errors import RobotLabError
from robotlab.streaming import HITL_RESOLVED
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.models import ToolEffect
from robotlab_django.streaming.event_stream import publish_events

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

__all__ = ["EffectResolutionError", "mark_done", "may_resolve", "retry"]


class EffectResolutionError(RobotLabError, ValueError):
    """An effect that cannot be resolved (its outcome is known), or a user who may not resolve it."""


def may_resolve(user: _AnyUser | None) -> bool:
    """Whether ``user`` may resolve tool effects: the ``change`` permission of the tool effect model."""
    opts = ToolEffect._meta
    return bool(user is not None and user.has_perm(f"{opts.app_label}.{get_permission_codename('change', opts)}"))


def mark_done(effect: ToolEffect, result: str, user: _AnyUser | None = None, *, check: bool = True) -> Any:
    """The unknown ``effect`` happened: store ``result`` as what the model reads, and resume its run.

    Args:
        effect: An effect whose outcome is unknown.
        result: What the tool would have returned (the model reads it as the tool's result).
        user: Who resolves it (recorded; checked with :func:`may_resolve` unless ``check`` is false).
        check: Check ``user`` (a trusted caller, such as a test or a command, passes ``False``).

    Returns:
        The run's row, queued again; ``None`` when the run no longer waits for this effect.

    Raises:
        EffectResolutionError: ``user`` may not resolve effects, or the effect's outcome is not unknown.
    """
    return _resolve(effect, {"status": ToolEffect.Status.COMPLETED, "result": {"text": str(result)},
                             "finished_at": timezone.now()}, user, check, "done")


def retry(effect: ToolEffect, user: _AnyUser | None = None, *, check: bool = True) -> Any:
    """Have the tool of the unknown ``effect`` run again, and resume its run (arguments as for :func:`mark_done`)."""
    return _resolve(effect, {"status": ToolEffect.Status.RETRY}, user, check, "retry")


def _resolve(effect: ToolEffect, fields: dict[str, Any], user: _AnyUser | None, check: bool, answer: str) -> Any:
    if check and not may_resolve(user):
        raise EffectResolutionError(f"{user} may not resolve tool effects (it needs the tool effect model's "
                                    "change permission).")
    by = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        if not ToolEffect.objects.filter(pk=effect.pk, status=ToolEffect.Status.UNKNOWN).update(
                **fields, resolved_by_id=by, resolved_at=timezone.now()):
            current = ToolEffect.objects.filter(pk=effect.pk).values_list("status", flat=True).first()
            raise EffectResolutionError(f"The effect {effect} is {current or 'gone'}, not of unknown outcome; "
                                        "there is nothing to resolve.")
        row = _waiting_run(effect)
    for name, value in fields.items():
        setattr(effect, name, value)
    if row is None:
        return None
    request_id = (row.question or {}).get("request_id")
    publish_events(row, [(HITL_RESOLVED, {"request_id": request_id, "answer": answer, "status": "resolved"})])
    from robotlab_django.runs.executor import dispatch

    dispatch(row.pk)  # after the commit: the "sync" executor runs it here and now
    return type(row).objects.get(pk=row.pk)


def _waiting_run(effect: ToolEffect) -> Any:
    """Queue the run parked on ``effect`` again (its network turn runs on); ``None`` when none waits for it."""
    model = swappable.result_model()
    row = model.objects.filter(pk=effect.result_pk).first()
    if row is None or row.status != Status.AWAITING or (row.question or {}).get("effect") != effect.pk:
        return None
    now = timezone.now()
    if not model.objects.filter(pk=row.pk, status=Status.AWAITING).update(status=Status.QUEUED, question={},
                                                                          attempts=0, updated_at=now):
        return None
    if row.parent_id is not None:  # the task of a distributed turn: the turn runs on
        model.objects.filter(pk=row.parent_id, status=Status.AWAITING).update(status=Status.RUNNING, question={},
                                                                              updated_at=now)
    return row  # as it was read: its question is what hitl.resolved answers
