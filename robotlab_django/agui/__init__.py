"""The AG-UI server: every registered robot and network as an AG-UI agent, over HTTP and Server-Sent Events.

Include :mod:`robotlab_django.agui.urls` in a URLconf (``path("agui/", include("robotlab_django.agui.urls"))``).
``POST <name>`` takes AG-UI's ``RunAgentInput`` and answers with the run's events as SSE
(:mod:`~robotlab_django.agui.views`). A run is the app's own run (a :class:`~robotlab_django.models.RobotResult`
executed by the configured executor), a thread is the caller's thread, a parked run (a question, a tool call to
approve) ends the AG-UI run with an interrupt that the next request resumes, and every event carries an SSE id from
which a dropped stream is replayed exactly (:mod:`~robotlab_django.agui.positions`). What each stored event kind
becomes is :data:`~robotlab_django.agui.events.AGUI_EVENTS`; the translation is
:class:`~robotlab_django.agui.translate.Translator`. Needs no library: the wire is JSON the server writes itself.
"""

from __future__ import annotations

__all__: list[str] = []
