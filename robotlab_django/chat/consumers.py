"""The thread websocket: live run events, replay after a reconnect, and messages that start runs.

``ws/robotlab/threads/<pk>/`` (:mod:`robotlab_django.routing`), behind
``AllowedHostsOriginValidator(AuthMiddlewareStack(...))`` (:mod:`robotlab_django.asgi`). Only the
thread's owner, or an active staff member with the thread model's ``view`` permission (the admin's
rule, :func:`~robotlab_django.chat.access.may_view_others`), may connect; anyone else is refused with close
code ``4403`` (also an anonymous visitor, unless ``settings.ROBOTLAB_CHAT_LOGIN_REQUIRED`` is false and
the thread is one its session created, as on the chat pages).

The right is checked again against the session as stored now (:mod:`robotlab_django.chat.revocation`)
before every frame that acts (a run queued, answered or cancelled), before a replay, and before live
events are relayed (at most every :attr:`ThreadConsumer.recheck_interval` seconds); a user who logged
out or was deactivated is closed at once through their per-user group. A revoked socket is closed
with ``4403``. A failed run's provider error reaches the client as a short message
(:mod:`robotlab_django.runs.user_errors`). A message past the user's rate limit
(:mod:`robotlab_django.accounting.rate_limits`) queues nothing and gets an error frame.

Server to client::

    {"type": "events", "events": [{"kind", "run_id", "seq", "ts", "cursor", ...}, ...]}
    {"type": "events", "t_emit": <Unix time>, "events": [...]}   # live: when the worker sent the batch
    {"type": "replayed", "cursor": <the last cursor sent>}   # after a resume
    {"type": "queued", "result_id": 12, "run_id": "...", "sequence_number": 3}   # + "on_busy", "behind", "notice"
    {"type": "error", "error": "..."}                       # the socket stays open
    {"type": "error", "error": "...", "retry_after": 12}    # a message past the user's rate limit
    {"type": "answered" | "cancelled" | "decided", "result_id": 12, "status": "queued"}

Client to server::

    {"type": "resume", "after": <cursor>}   # or ?after=<cursor> on the URL: replay, then live
    {"type": "message", "text": "..."}      # the owner only: queue a run of the thread's robot
    {"type": "answer", "result_id": 12, "text": "..."}   # the owner only: answer a parked run's question
    {"type": "approval", "result_id": 12, "request_id": "...", "decision": "approve"}   # or "deny": a tool call
    {"type": "cancel", "result_id": 12}     # the owner only: cancel a queued, running or awaiting run

What a frame does on the database is :mod:`robotlab_django.chat.socket_frames`'s. The ``cursor`` is the ``RunEvent``
primary key (see :mod:`robotlab_django.streaming.event_stream`). The consumer
joins the group before it replays, and drops live events it already sent, so nothing falls in
between; a client should still drop events whose per-run ``seq`` it has seen.

The channel layer may lose a batch (channels-redis drops messages to a full channel; a publish to a
hung Redis times out). Each batch names the last cursor its run had stored before it (``prev``), and
the consumer remembers the last cursor it sent of each run: when ``prev`` is past it, the missing
events are read from the stored rows and sent first, so a connected client gets the whole stream
without reconnecting. A socket that connects without ``after`` starts from the thread's newest
stored event: what was stored before it connected is not sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from robotlab_django.chat.access import visible_thread
from robotlab_django.chat.revocation import still_allowed, user_group
from robotlab_django.chat.socket_frames import (
    CONTROLLED,
    DATABASE_ERRORS,
    control_run,
    newest,
    queue_run,
    read,
    stored_after,
    stored_between,
    text_problem,
)
from robotlab_django.runs.user_errors import public_events
from robotlab_django.streaming.broadcast import MESSAGE_TYPE, register_consumer_loop, thread_group
from robotlab_django.tracing import links

__all__ = ["CLOSE_FORBIDDEN", "MAX_CURSOR", "MAX_FRAME_BYTES", "REPLAY_BATCH", "ThreadConsumer", "visible_thread"]

#: The close code for a user who may not see the thread.
CLOSE_FORBIDDEN = 4403
#: Larger client frames are answered with an error and ignored.
MAX_FRAME_BYTES = 64 * 1024
#: Stored events sent per replay frame.
REPLAY_BATCH = 500
#: The largest cursor a client may send (a database's 64-bit primary key).
MAX_CURSOR = 2**63 - 1
#: The error frame of a frame whose database work failed twice.
DATABASE_DOWN = "The database did not answer; send the frame again in a moment (a resume replays what you missed)."

logger = logging.getLogger("robotlab_django")


class ThreadConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    """Streams a thread's run events to its owner (or staff who may view it), with replay.

    The owner can send messages.
    """

    thread_id: int
    group: str = ""
    #: The per-user group (``robotlab.user.<pk>``) a logout or deactivation closes; empty for a visitor.
    user_group: str = ""
    #: Seconds a check of the session stays good for relaying live events (queuing a run and a replay
    #: always check first).
    recheck_interval: float = 2.0
    #: When (``time.monotonic()``) the session was last found to allow the thread.
    checked_at: float = 0.0
    #: Set once the socket's right is gone: nothing more is relayed.
    revoked: bool = False
    #: The highest cursor sent (or replayed through): what ``replayed`` reports.
    cursor: int = 0
    #: Events of a run this socket has sent nothing of are new past this cursor.
    baseline: int = 0
    is_owner: bool = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        #: The last cursor sent of each run (``RobotResult`` pk).
        self.sent: dict[Any, int] = {}

    async def connect(self) -> None:
        """Authorize, join the thread's group, accept, and replay ``?after=`` when given."""
        self.thread_id = int(self.scope["url_route"]["kwargs"]["thread_id"])
        thread, self.is_owner = await read(visible_thread, self.thread_id, self.scope.get("user"),
                                            self.scope.get("session"))
        if thread is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.checked_at = time.monotonic()
        self.group = thread_group(self.thread_id)
        register_consumer_loop(asyncio.get_running_loop())
        user = self.scope.get("user")
        if getattr(user, "is_authenticated", False):
            self.user_group = user_group(user.pk)
        if self.channel_layer is not None:
            await self.channel_layer.group_add(self.group, self.channel_name)
            if self.user_group:
                await self.channel_layer.group_add(self.user_group, self.channel_name)
        after = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("after")
        if not after:  # read before accepting: whatever is stored once the client is connected is new to it
            self.baseline = self.cursor = await read(newest, self.thread_id)
        await self.accept()
        if after:
            await self._resume(after[-1])

    async def disconnect(self, code: int) -> None:
        """Leave the thread's group and the user's."""
        if self.channel_layer is None:
            return
        for group in (self.group, self.user_group):
            if group:
                await self.channel_layer.group_discard(group, self.channel_name)

    async def robotlab_revoke(self, message: dict[str, Any]) -> None:
        """The user logged out or was deactivated: close with ``4403`` (and relay nothing more)."""
        self.revoked = True
        await self.close(code=CLOSE_FORBIDDEN)

    async def _allowed(self, *, fresh: bool) -> bool:
        """Whether the socket's session still may see the thread; closes the socket (``4403``) if not.

        ``fresh=False`` trusts a check made within :attr:`recheck_interval` seconds.
        """
        if self.revoked:
            return False
        if not fresh and time.monotonic() - self.checked_at < self.recheck_interval:
            return True
        thread, _owner = await read(still_allowed, self.thread_id, self.scope.get("user"), self.scope.get("session"))
        if thread is None:
            await self.robotlab_revoke({})
            return False
        self.checked_at = time.monotonic()
        return True

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None,
                      **kwargs: object) -> None:
        """Check the frame's size and JSON before :meth:`receive_json`; a bad frame gets an error."""
        raw = text_data if text_data is not None else bytes_data
        size = len(raw.encode() if isinstance(raw, str) else raw or b"")
        if size > MAX_FRAME_BYTES:
            await self._error(f"The frame has {size} bytes; the limit is {MAX_FRAME_BYTES}.")
            return
        try:
            content = json.loads(raw or b"")
        except (ValueError, UnicodeDecodeError):
            await self._error("The frame is not JSON.")
            return
        except RecursionError:
            await self._error("The frame is nested too deeply.")
            return
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self._error('A frame is a JSON object with a "type".')
            return
        try:
            with links.from_request(self.scope.get("headers") or ()):  # a traced request: its runs in its trace
                await self.receive_json(content)
        except DATABASE_ERRORS as exc:  # a dropped connection: the frame gets an error, not a 1011 close
            logger.warning("robotlab: a %r frame on thread %s failed on the database: %s", content["type"],
                           self.thread_id, exc)
            await self._error(DATABASE_DOWN)

    async def receive_json(self, content: dict[str, Any], **kwargs: object) -> None:
        """Handle ``resume`` and ``message`` frames."""
        kind = content["type"]
        if kind == "resume":
            await self._resume(content.get("after", 0))
        elif kind == "message":
            text = content.get("text")
            if not isinstance(text, str) or not text.strip():
                await self._error('A message needs a non-empty "text".')
                return
            problem = text_problem(text)
            if problem:
                await self._error(problem)
                return
            answer = await database_sync_to_async(queue_run)(
                self.thread_id, self.scope.get("user"), self.scope.get("session"), text.strip())
            if answer is None:
                await self.robotlab_revoke({})
                return
            self.checked_at = time.monotonic()
            await self.send_json(answer)
        elif kind in CONTROLLED:
            if kind == "answer" and not isinstance(content.get("text"), str):
                await self._error('An answer needs a "text" (a string).')
                return
            if kind == "approval" and content.get("decision") not in ("approve", "deny"):
                await self._error('An approval needs a "decision": "approve" or "deny".')
                return
            problem = text_problem(content["text"]) if kind == "answer" else ""
            if problem:
                await self._error(problem.replace("The message", "The answer"))
                return
            answer = await database_sync_to_async(control_run)(
                self.thread_id, self.scope.get("user"), self.scope.get("session"), content)
            if answer is None:
                await self.robotlab_revoke({})
                return
            self.checked_at = time.monotonic()
            await self.send_json(answer)
        else:
            await self._error(f"Unknown frame type {kind!r}; send 'resume', 'message', 'answer', 'approval' or "
                              "'cancel'.")

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Handle a message; live batches skip Channels' per-message ``close_old_connections``.

        Channels runs ``close_old_connections`` in a worker thread before every handler, a thread
        hop per message that serializes all consumers of the process on one thread. A batch of
        events touches no database, so it goes straight to :meth:`robotlab_events`; the other
        handlers (connect, frames from the client) keep Channels' behaviour.
        """
        if message.get("type") == MESSAGE_TYPE:
            try:
                allowed = await self._allowed(fresh=False)
                if allowed:
                    await self.robotlab_events(message)
            except DATABASE_ERRORS as exc:  # nothing is relayed unchecked; the client resumes to catch up
                logger.warning("robotlab: thread %s socket could not check its session: %s", self.thread_id, exc)
                await self._error(DATABASE_DOWN)
        else:
            await super().dispatch(message)

    async def robotlab_events(self, message: dict[str, Any]) -> None:
        """A batch from the channel layer: send what this socket missed of its run, then its new events."""
        result, prev = message.get("result"), message.get("prev")
        reached = self.sent.get(result, self.baseline)
        if result is not None and isinstance(prev, int) and prev > reached:  # a batch was lost on the way
            missed = await read(stored_between, self.thread_id, result, reached, prev)
            if missed:
                await self.send_json({"type": "events", "events": public_events(self._mark(result, missed))})
            reached = self.sent.get(result, reached)
        fresh = [event for event in message.get("events", [])
                 if not isinstance(event.get("cursor"), int) or event["cursor"] > reached]
        if fresh:
            frame: dict[str, Any] = {"type": "events", "events": public_events(self._mark(result, fresh))}
            if "t_emit" in message:
                frame["t_emit"] = message["t_emit"]
            await self.send_json(frame)

    def _mark(self, result: int | None, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Note ``events`` (of run ``result``) as sent; returns them."""
        cursors = [event["cursor"] for event in events if isinstance(event.get("cursor"), int)]
        if cursors:
            self.cursor = max(self.cursor, *cursors)
            if result is not None:
                self.sent[result] = max(self.sent.get(result, 0), *cursors)
        return events

    async def _resume(self, after: Any) -> None:  # what the client sent: anything (``int()`` checks it)
        try:
            position = int(after)
        except (TypeError, ValueError, OverflowError):  # OverflowError: a float such as 1e400 (infinity)
            await self._error('"after" must be an integer cursor.')
            return
        if not 0 <= position <= MAX_CURSOR:
            await self._error(f'"after" must be a cursor from 0 to {MAX_CURSOR}, not {position}.')
            return
        if not await self._allowed(fresh=True):
            return
        while batch := await read(stored_after, self.thread_id, position, REPLAY_BATCH):
            position = batch[-1][1]["cursor"]
            for result, event in batch:
                self.sent[result] = max(self.sent.get(result, 0), event["cursor"])
            await self.send_json({"type": "events", "events": public_events(event for _, event in batch)})
            if len(batch) < REPLAY_BATCH:
                break
        self.baseline = max(self.baseline, position)
        self.cursor = max(self.cursor, position)
        await self.send_json({"type": "replayed", "cursor": self.cursor})

    async def _error(self, error: str) -> None:
        await self.send_json({"type": "error", "error": error})
