"""URLs for the API token tests: the admin and the ACP server."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("acp/", include("robotlab_django.acp.urls"))]
