"""The A2A URLconf: ``path("a2a/", include("robotlab_django.a2a.urls"))``.

Each registered robot and network is an agent at ``<name>/`` (its JSON-RPC endpoint) with its card at
``<name>/.well-known/agent-card.json``; the index lists every card.
"""

from __future__ import annotations

from django.urls import path, re_path

from robotlab_django.a2a import views

app_name = "robotlab_a2a"

urlpatterns = [
    path("", views.index, name="index"),
    path("<str:name>/.well-known/agent-card.json", views.card, name="card"),
    path("<str:name>/", views.agent, name="agent"),
    re_path(r"^(?P<path>.*)$", views.not_found, name="not-found"),  # any other path: a JSON-RPC error
]
