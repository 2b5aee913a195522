"""The Agent Communication Protocol (ACP) server: every registered robot and network as an ACP agent.

Include :mod:`robotlab_django.acp.urls` in a URLconf (``path("acp/", include("robotlab_django.acp.urls"))``).
Runs are the app's own runs (:class:`~robotlab_django.models.RobotResult` rows executed by the configured
executor), sessions are threads, requests authenticate with API tokens (:mod:`robotlab_django.protocols.tokens`).
"""
