"""URLs for the API token and protocol server tests: the admin, the ACP, A2A and AG-UI servers."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("acp/", include("robotlab_django.acp.urls")),
               path("a2a/", include("robotlab_django.a2a.urls")), path("agui/", include("robotlab_django.agui.urls"))]
