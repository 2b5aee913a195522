"""The app's websocket URLs: ``ws/robotlab/threads/<pk>/`` to :class:`~.consumers.ThreadConsumer`."""

from __future__ import annotations

from django.urls import path

from robotlab_django.chat.consumers import ThreadConsumer

__all__ = ["websocket_urlpatterns"]

#: Include these in your ``URLRouter`` (or use :func:`robotlab_django.asgi.get_robotlab_asgi_application`).
websocket_urlpatterns = [
    path("ws/robotlab/threads/<int:thread_id>/", ThreadConsumer.as_asgi(), name="robotlab-thread-ws"),
]
