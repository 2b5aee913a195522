"""The ACP URLconf: ``path("acp/", include("robotlab_django.acp.urls"))``."""

from __future__ import annotations

from django.urls import path, re_path

from robotlab_django.acp import views

app_name = "robotlab_acp"

urlpatterns = [
    path("ping", views.ping, name="ping"),
    path("agents", views.agents, name="agents"),
    path("agents/<str:name>", views.agent, name="agent"),
    path("runs", views.runs, name="runs"),
    path("runs/<str:run_id>", views.run, name="run"),
    path("runs/<str:run_id>/cancel", views.run_cancel, name="run-cancel"),
    path("runs/<str:run_id>/events", views.run_events, name="run-events"),
    path("sessions/<str:session_id>", views.session, name="session"),
    path("session/<str:session_id>", views.session_wrapped, name="session-wrapped"),
    path("resources/<str:token>", views.resource, name="resource"),
    re_path(r"^(?P<path>.*)$", views.not_found, name="not-found"),  # any other path: a JSON not_found
]
