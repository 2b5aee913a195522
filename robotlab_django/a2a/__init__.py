"""The Agent2Agent (A2A) server: every registered robot and network as an A2A agent, on the official ``a2a-sdk``.

Include :mod:`robotlab_django.a2a.urls` in a URLconf (``path("a2a/", include("robotlab_django.a2a.urls"))``).
The SDK's JSON-RPC dispatcher parses and answers the protocol (:mod:`~robotlab_django.a2a.views`, through
:mod:`~robotlab_django.a2a.bridge`); :class:`~robotlab_django.a2a.handler.RobotLabRequestHandler`, the SDK's
``RequestHandler``, serves it on the app's own runs: tasks are runs executed by the configured executor,
contexts are threads, a parked run is ``input-required``, and requests authenticate with API tokens
(:mod:`robotlab_django.api_tokens`). Needs the ``protocols`` extra (``pip install "robotlab[protocols]"``).
"""
