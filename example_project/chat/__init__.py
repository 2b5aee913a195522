"""The example project's app: its robots (``robots.py``), the ``support`` command and the login page."""

from __future__ import annotations

__all__: list[str] = []
