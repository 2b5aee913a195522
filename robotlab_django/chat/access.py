"""Who may see a thread, and which robot a new thread runs: the rules the chat pages and the websocket share.

Every chat page and the thread websocket need a logged-in user unless
``settings.ROBOTLAB_CHAT_LOGIN_REQUIRED`` is ``False``; then an anonymous visitor owns the ownerless
threads its session created (their primary keys are listed under :data:`SESSION_KEY`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from robotlab_django import swappable
from robotlab_django.registry import registry

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser
    from django.contrib.sessions.backends.base import SessionBase

    from robotlab_django.models import Thread

__all__ = ["SESSION_KEY", "default_robot", "login_required", "may_view_others", "visible_thread"]

#: The session key listing the threads an anonymous visitor created (when login is not required).
SESSION_KEY = "robotlab_threads"


def login_required() -> bool:
    """Whether the chat pages need a login (``settings.ROBOTLAB_CHAT_LOGIN_REQUIRED``, default True)."""
    return bool(getattr(settings, "ROBOTLAB_CHAT_LOGIN_REQUIRED", True))


def default_robot() -> str | None:
    """A new thread's robot: ``settings.ROBOTLAB_CHAT_ROBOT``, else ``chat`` if registered, else the first."""
    configured = getattr(settings, "ROBOTLAB_CHAT_ROBOT", None)
    if configured:
        return str(configured)
    names = registry.names()
    if "chat" in names:
        return "chat"
    return names[0] if names else None


def may_view_others(user: _AnyUser | None) -> bool:
    """Whether ``user`` may read threads they do not own: the admin's rule for the thread model.

    An active staff member with the thread model's ``view`` permission (a superuser has every
    permission); ``is_staff`` alone is not enough.
    """
    if user is None or not user.is_authenticated or not user.is_active or not user.is_staff:
        return False
    opts = swappable.thread_model()._meta
    return bool(user.has_perm(f"{opts.app_label}.view_{opts.model_name}"))


def visible_thread(thread_id: int, user: _AnyUser | None,
                   session: SessionBase | None = None) -> tuple[Thread | None, bool]:
    """The thread ``thread_id`` if ``user`` may see it, and whether they own it; ``(None, False)`` if not.

    The owner sees a thread, and so does a user who :func:`may_view_others` (not as its owner); an
    anonymous visitor sees an ownerless thread its session created when the chat needs no login
    (``settings.ROBOTLAB_CHAT_LOGIN_REQUIRED = False``).
    """
    thread = swappable.thread_model().objects.filter(pk=thread_id).first()
    if thread is None:
        return None, False
    if user is not None and user.is_authenticated:
        if thread.user_id == user.pk:
            return thread, True
        return (thread, False) if may_view_others(user) else (None, False)
    if login_required() or thread.user_id is not None:
        return None, False
    mine = session is not None and thread.pk in (session.get(SESSION_KEY) or [])
    return (thread, True) if mine else (None, False)
