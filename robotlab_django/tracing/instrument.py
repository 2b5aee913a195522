"""``ROBOTLAB["INSTRUMENT"]``: the core's OpenTelemetry spans and metrics on or off in this process.

The setting is handed to the core's ``instrument`` setting (``robotlab.configure(instrument=...)``) when the app
is ready, and again whenever ``settings.ROBOTLAB`` changes (``override_settings``). ``None`` (the default) leaves
the core's own value: ``ROBOT_LAB_INSTRUMENT``, or what the project configured, on unless told otherwise.
"""

from __future__ import annotations

from django.core.signals import setting_changed

from robotlab.config import configure, get_config
from robotlab_django.conf import app_settings

__all__ = ["apply", "connect_signals"]

#: The core's own value, kept while the app's setting overrides it (``None``: not overridden).
_own: bool | None = None


def apply() -> None:
    """Set the core's ``instrument`` setting from ``ROBOTLAB["INSTRUMENT"]``; ``None`` gives the core its own back."""
    global _own
    value = app_settings.INSTRUMENT
    if value is None:
        if _own is not None:
            configure(instrument=_own)
            _own = None
        return
    if _own is None:
        _own = bool(get_config().instrument)
    configure(instrument=bool(value))


def _changed(setting: str = "", **kwargs: object) -> None:
    if setting == "ROBOTLAB":
        apply()


def connect_signals() -> None:
    """Apply the setting now, and again whenever ``settings.ROBOTLAB`` changes."""
    apply()
    setting_changed.connect(_changed, dispatch_uid="robotlab_django_instrument")
