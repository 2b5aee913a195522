"""URLs of the chat pages: ``path("robotlab/", include("robotlab_django.urls"))`` (namespace ``robotlab``)."""

from __future__ import annotations

from django.urls import path

from robotlab_django.chat import views

__all__ = ["app_name", "urlpatterns"]

app_name = "robotlab"

urlpatterns = [
    path("", views.thread_list, name="thread_list"),
    path("threads/<int:pk>/", views.chat, name="chat"),
    path("threads/<int:pk>/messages/", views.post_message, name="post_message"),
    path("threads/<int:pk>/results/", views.results_json, name="results_json"),
    path("threads/<int:pk>/results/<int:result_pk>/answer/", views.post_answer, name="post_answer"),
    path("threads/<int:pk>/results/<int:result_pk>/approval/", views.post_approval, name="post_approval"),
    path("threads/<int:pk>/results/<int:result_pk>/cancel/", views.post_cancel, name="post_cancel"),
]
