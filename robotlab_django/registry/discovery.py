"""Finding the robots of installed apps: importing each app's robot modules, whose decorators register them."""

from __future__ import annotations

import pkgutil
from importlib import import_module

__all__ = ["import_robot_modules"]


def import_robot_modules(module_names: tuple[str, ...] | None = None) -> list[str]:
    """Import each installed app's robot modules (``ROBOTLAB["ROBOT_MODULES"]``, default ``robots``).

    A package's submodules are imported as well, except those whose name starts with ``_``.
    An error inside a robot module propagates (as the admin's autodiscovery does).

    Returns:
        The dotted names of the modules imported.
    """
    from django.apps import apps
    from django.utils.module_loading import module_has_submodule

    from robotlab_django.conf import app_settings

    imported: list[str] = []
    for config in apps.get_app_configs():
        for module_name in module_names or app_settings.ROBOT_MODULES:
            if not module_has_submodule(config.module, module_name):
                continue
            module = import_module(f"{config.name}.{module_name}")
            imported.append(module.__name__)
            for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
                if not info.name.startswith("_"):
                    imported.append(import_module(f"{module.__name__}.{info.name}").__name__)
    return imported
