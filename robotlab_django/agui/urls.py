"""The AG-UI URLconf: ``path("agui/", include("robotlab_django.agui.urls"))``.

Each registered robot and network is an agent at ``<name>`` (``POST`` a ``RunAgentInput``), with ``<name>/cancel``.
"""

from __future__ import annotations

from django.urls import path, re_path

from robotlab_django.agui import views

__all__ = ["app_name", "urlpatterns"]

app_name = "robotlab_agui"

urlpatterns = [
    path("<str:name>/cancel", views.cancel, name="cancel"),
    path("<str:name>", views.agent, name="agent"),
    path("<str:name>/", views.agent),
    re_path(r"^(?P<path>.*)$", views.not_found, name="not-found"),  # any other path: a JSON not_found
]
