"""The Agent2Agent (A2A) server: every registered robot and network as an A2A agent, on the official ``a2a-sdk``.

Include :mod:`robotlab_django.a2a.urls` in a URLconf (``path("a2a/", include("robotlab_django.a2a.urls"))``).
The SDK's JSON-RPC dispatcher parses and answers the protocol (:mod:`~robotlab_django.a2a.views`, through
:mod:`~robotlab_django.a2a.bridge`); :class:`~robotlab_django.a2a.handler.RobotLabRequestHandler`, the SDK's
``RequestHandler``, serves it on the app's own runs: tasks are runs executed by the configured executor,
contexts are threads, a parked run is ``input-required``, and requests authenticate with API tokens
(:mod:`robotlab_django.protocols.tokens`). Needs the ``protocols`` extra (``pip install "robotlab-py[protocols]"``).
"""

from __future__ import annotations

import importlib.util

from django.core.exceptions import ImproperlyConfigured

__all__: list[str] = []

_MISSING = [name for name in ("a2a", "starlette", "sse_starlette") if importlib.util.find_spec(name) is None]
if _MISSING:
    raise ImproperlyConfigured(f"The A2A server needs {', '.join(_MISSING)}: pip install \"robotlab-py[protocols]\" "
                               "(a2a-sdk with its HTTP server parts).")
