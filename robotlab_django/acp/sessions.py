"""ACP sessions: a session is a thread of the caller, its ``history`` the thread's messages as resource URLs.

The official client (``acp-sdk``) reads ``GET /sessions/{id}`` (the bare ``Session``) before a session's first run
on a server, and loads the history's URLs with a plain HTTP client, as the protocol's resources are: each URL is
signed (Django's :mod:`~django.core.signing`, valid :data:`HISTORY_MAX_AGE` seconds) and names one message of one
run, the user's input (with its files) or the agent's reply, so it serves without a token, like a presigned URL.
Reading the session again gives fresh URLs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core import signing
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.http import HttpRequest
from django.urls import reverse

from robotlab_django import swappable
from robotlab_django.acp.wire import text_message

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from robotlab_django.models import RobotResult, Thread

__all__ = ["HISTORY_MAX_AGE", "history_message", "session_object"]

#: Seconds a history URL stays valid (the protocol's presigned resource URLs last a week too).
HISTORY_MAX_AGE = 7 * 24 * 3600

_SALT = "robotlab_django.acp.history"
_INPUT, _OUTPUT = "input", "output"


def _runs(thread: Thread) -> QuerySet[RobotResult]:
    """The thread's own runs (not a network's task rows or delegated runs), in order."""
    return (swappable.result_model().objects.filter(thread=thread, parent__isnull=True, delegated_by="")
            .order_by("sequence_number"))


def session_object(request: HttpRequest, thread: Thread, session_id: str) -> dict[str, Any]:
    """The ACP ``Session`` of ``thread`` (its id ``session_id``): ``{"id", "history", "state"}``.

    ``history`` is a URL per message: each run's input (when it had one) and reply (when it has one), in order.
    """
    history: list[str] = []
    # whether a run has files, not the files themselves (each may hold megabytes)
    runs = _runs(thread).annotate(has_files=ExpressionWrapper(~Q(attachments=[]), output_field=BooleanField()))
    for run_id, text, has_files, reply in runs.values_list("run_id", "input", "has_files", "reply"):
        if text or has_files:
            history.append(_url(request, run_id, _INPUT))
        if reply:
            history.append(_url(request, run_id, _OUTPUT))
    return {"id": session_id, "history": history, "state": None}


def _url(request: HttpRequest, run_id: str, part: str) -> str:
    token = signing.dumps([run_id, part], salt=_SALT)
    return request.build_absolute_uri(reverse("robotlab_acp:resource", args=[token]))


def history_message(token: str) -> dict[str, Any] | None:
    """The ACP ``Message`` a history URL's ``token`` names; ``None`` when it is bad, expired, or its run is gone."""
    try:
        run_id, part = signing.loads(token, salt=_SALT, max_age=HISTORY_MAX_AGE)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    row = swappable.result_model().objects.filter(run_id=str(run_id)).first()
    if row is None:
        return None
    stamps = {"created_at": row.created_at.isoformat(),
              "completed_at": (row.finished_at or row.updated_at or row.created_at).isoformat()}
    if part == _OUTPUT:
        return {**text_message(row.reply), **stamps}
    parts = text_message(row.input, "user")["parts"] if row.input else []
    for file in row.attachments or []:
        found: dict[str, Any] = {"content_type": file.get("mime_type") or "application/octet-stream"}
        if file.get("name"):
            found["name"] = file["name"]
        if file.get("url"):
            found["content_url"] = file["url"]
        else:
            found.update(content=file.get("data") or "", content_encoding="base64")
        parts.append(found)
    return {"role": "user", "parts": parts, **stamps}
