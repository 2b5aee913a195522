"""An open websocket does not outlive its session: fresh checks of the user, and closing a user's sockets.

The thread websocket (:class:`~robotlab_django.chat.consumers.ThreadConsumer`) is authorized when it
connects, from the session it connected with. Later, the user may log out (their session row is
deleted), be deactivated, change their password (the session's hash no longer matches), or the
session may expire. So the consumer asks :func:`still_allowed` again before every frame that acts (it
queues, answers or cancels a run) and, at most every few seconds, before it relays events; that reads
the session afresh from the session store and the user from the database, as Django's own ``get_user``
does for a request.

It also joins the per-user group :func:`user_group` (``robotlab.user.<pk>``). When the user logs
out (``user_logged_out``) or is saved with ``is_active=False``, :func:`revoke_user_sockets` sends
the group a ``robotlab.revoke`` message and every socket of that user closes with code ``4403``
at once, in every process (through the channel layer).
"""

from __future__ import annotations

import asyncio
import logging
from importlib import import_module
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from django.conf import settings
from django.contrib.auth import get_user, get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_save
from django.http import HttpRequest

from robotlab_django.chat.access import visible_thread
from robotlab_django.runs.sync_bridge import call_sync
from robotlab_django.streaming.broadcast import get_layer, group_send

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser, _User
    from django.contrib.sessions.backends.base import SessionBase

    from robotlab_django.models import Thread

__all__ = ["REVOKE_TYPE", "revoke_user_sockets", "session_user", "still_allowed", "user_group"]

logger = logging.getLogger("robotlab_django")

#: The ``type`` of the message that closes a user's sockets (``ThreadConsumer.robotlab_revoke``).
REVOKE_TYPE = "robotlab.revoke"


def user_group(user_id: object) -> str:
    """The channel-layer group of one user's open thread sockets: ``robotlab.user.<pk>``."""
    return f"robotlab.user.{user_id}"


def _fresh_session(session: SessionBase) -> SessionBase:
    """The session ``session`` read again from its store (a new store object, nothing cached)."""
    key = getattr(session, "session_key", None)
    engine = import_module(settings.SESSION_ENGINE)
    store: SessionBase = engine.SessionStore(session_key=key)
    return store


def session_user(session: SessionBase) -> _AnyUser:
    """The user the session logs in now (``AnonymousUser`` once it is gone, expired or its user inactive).

    Django's ``get_user`` on the session as stored now: it checks the backend, that the user
    still exists and may log in (``is_active`` for the model backend) and the session's
    password hash.
    """
    return get_user(cast(HttpRequest, SimpleNamespace(session=_fresh_session(session))))  # all it reads


def still_allowed(thread_id: int, scope_user: _AnyUser | None,
                  session: SessionBase | None) -> tuple[Thread | None, bool]:
    """:func:`~robotlab_django.chat.access.visible_thread` for the session as it is now: ``(thread, is_owner)``.

    ``(None, False)`` when the socket's user logged out, was deactivated or deleted, or lost the
    right to see the thread; an anonymous visitor (when the chat needs no login) keeps a thread
    only while its stored session still lists it.
    """
    if session is None:
        return visible_thread(thread_id, scope_user, None)
    fresh = _fresh_session(session)
    if scope_user is not None and scope_user.is_authenticated:
        user = get_user(cast(HttpRequest, SimpleNamespace(session=fresh)))
        if not user.is_authenticated or user.pk != scope_user.pk:
            return None, False
        return visible_thread(thread_id, user, fresh)
    return visible_thread(thread_id, scope_user, fresh)


async def _arevoke(user_id: object) -> None:
    layer = get_layer()
    if layer is not None:
        await group_send(layer, user_group(user_id), {"type": REVOKE_TYPE})


def revoke_user_sockets(user_id: object) -> None:
    """Close every open thread socket of user ``user_id`` (in every process of the channel layer).

    Callable from sync code (a view, a signal receiver); failures are logged, never raised.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        call_sync(_arevoke, user_id)
        return
    # an async caller (Django's alogout runs receivers in a thread, so this is rare): don't block its loop
    task = asyncio.ensure_future(_arevoke(user_id))
    _pending.add(task)
    task.add_done_callback(_pending.discard)


_pending: set[asyncio.Future[None]] = set()


def _on_logout(sender: object, request: HttpRequest | None = None, user: _AnyUser | None = None,
               **kwargs: object) -> None:
    if user is not None and getattr(user, "pk", None) is not None:
        revoke_user_sockets(user.pk)


def _on_user_saved(sender: object, instance: _User, created: bool = False, **kwargs: object) -> None:
    if not created and getattr(instance, "is_active", True) is False:
        revoke_user_sockets(instance.pk)


def connect_signals() -> None:
    """Connect the receivers: ``user_logged_out`` and a deactivating save of the user model."""
    user_logged_out.connect(_on_logout, dispatch_uid="robotlab_revoke_on_logout")
    post_save.connect(_on_user_saved, sender=get_user_model(), dispatch_uid="robotlab_revoke_on_deactivate")
