"""The example project's URLs: the chat pages at the root, login/logout, the admin, the ACP, A2A and AG-UI servers
(MCP is served in asgi.py), django-oauth-toolkit's authorization server with ROBOTLAB_MCP_OAUTH=1."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

__all__ = ["urlpatterns"]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("acp/", include("robotlab_django.acp.urls")),
    path("a2a/", include("robotlab_django.a2a.urls")),
    path("agui/", include("robotlab_django.agui.urls")),
    path("", include("robotlab_django.urls")),
]
if "oauth2_provider" in settings.INSTALLED_APPS:  # ROBOTLAB_MCP_OAUTH=1: the MCP endpoint's authorization server
    urlpatterns.insert(0, path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")))
