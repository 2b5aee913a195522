"""Registering the admins: the app's own thread, result and step models here, a project's own with one call.

Importing this module registers :class:`~robotlab_django.admin.threads.ThreadAdmin` and
:class:`~robotlab_django.admin.results.RobotResultAdmin` for the app's models (Django's autodiscovery imports
:mod:`robotlab_django.admin`, which imports this); a project with its own models calls :func:`register_models`
in its ``admin.py``.
"""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from robotlab_django.admin.inlines import RobotResultInline, RunStepInline
from robotlab_django.admin.results import RobotResultAdmin
from robotlab_django.admin.threads import ThreadAdmin
from robotlab_django.models import RobotResult, RunStep, Thread

__all__ = ["register_models"]


def register_models(thread_model: type[models.Model], result_model: type[models.Model],
                    site: admin.AdminSite | None = None, *, step_model: type[models.Model] | None = None) -> None:
    """Register :class:`ThreadAdmin` and :class:`RobotResultAdmin` for a project's own models.

    ``result_model`` must have ``thread = ForeignKey(thread_model, related_name="results")``
    (the models ``robotlab_install --models`` writes do). A ``step_model`` (with
    ``result = ForeignKey(result_model)``) is shown inline on each result (:class:`RunStepInline`).
    """
    site = site or admin.site
    inline = type(f"{result_model.__name__}Inline", (RobotResultInline,), {"model": result_model})
    thread_admin = type(f"{thread_model.__name__}Admin", (ThreadAdmin,), {"inlines": (inline,)})
    site.register(thread_model, thread_admin)
    steps = () if step_model is None else (type(f"{step_model.__name__}Inline", (RunStepInline,),
                                                {"model": step_model}),)
    site.register(result_model, type(f"{result_model.__name__}Admin", (RobotResultAdmin,), {"inlines": steps}))


register_models(Thread, RobotResult, step_model=RunStep)
