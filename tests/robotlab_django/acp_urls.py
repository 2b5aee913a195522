"""URLs for the API token and protocol server tests: the admin, the ACP server and the A2A server."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("acp/", include("robotlab_django.acp.urls")),
               path("a2a/", include("robotlab_django.a2a.urls"))]
