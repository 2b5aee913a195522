"""robotlab_django: RobotLab's reusable Django app (threads, results, admin, scaffolding).

Add ``"robotlab_django"`` to ``INSTALLED_APPS``; its app label is ``robotlab``. This module imports
nothing of the app: importing models here would break app loading. Its one name,
:class:`~robotlab_django.runs.deps.RunDeps` (the ``deps`` of the app's runs), is imported when first used.

It does one thing when Django loads the app: it sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` in the
environment unless the project set it. Otherwise, importing litellm fetches its model price map from
the network, and a process that cannot reach it (a Celery worker's pool child on a host without
internet access, behind a firewall) waits 10 to 30 seconds on every start for the fetch to time out.
Set it early, it covers every import of litellm in the process and in the processes it starts
(a robot module of the project, a library, RobotLab's own), not only RobotLab's. Set
``LITELLM_LOCAL_MODEL_COST_MAP=False`` in the environment to fetch a fresh price map.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runs.deps import RunDeps

__all__ = ["RunDeps"]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def __getattr__(name: str) -> Any:
    """``robotlab_django.RunDeps``, imported when first asked for (the package itself imports nothing of the app)."""
    if name == "RunDeps":
        from .runs.deps import RunDeps

        return RunDeps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
