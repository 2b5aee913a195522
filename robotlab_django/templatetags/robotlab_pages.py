"""``{% load robotlab_pages %}``: what the chat pages' header needs from the project's settings."""

from __future__ import annotations

from django import template
from django.urls import NoReverseMatch, reverse

from robotlab_django.conf import app_settings

__all__ = ["logout_next", "register"]

register = template.Library()


@register.simple_tag
def logout_next() -> str:
    """Where the header's "Log out" asks to land: the chat's thread list, or ``""`` to leave it to the project.

    Django's ``LogoutView`` without ``LOGOUT_REDIRECT_URL`` renders ``registration/logged_out.html``, which
    ``django.contrib.admin`` provides: a chat user would land on the admin's "Logged out" page. So the form
    sends ``next`` = the thread list (which shows a logged-out visitor the login page), unless the project
    set ``LOGOUT_REDIRECT_URL``, which then wins.
    """
    if app_settings.logout_redirect_url:
        return ""
    try:
        return reverse("robotlab:thread_list")
    except NoReverseMatch:
        return ""
