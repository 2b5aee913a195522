"""One AG-UI stream of a stored run: its start, the run's events as they are stored, its end, each with its SSE id.

:func:`start_events` is the start of an AG-UI run: ``RUN_STARTED`` (its ``metadata.robotlab`` names the stored run),
for a new run ``MESSAGES_SNAPSHOT`` (the thread's earlier runs and the new message) and ``STATE_SNAPSHOT`` (the
client's state with the ``robotlab`` key). :func:`frames` then follows the run's stored events
(:func:`~robotlab_django.protocols.runs.afollow_events`) through a :class:`~robotlab_django.agui.translate.Translator`
and ends with what the settled row says. Every frame's id is its :class:`~robotlab_django.agui.positions.Position`:
given one (a ``Last-Event-ID``), the translator is rebuilt from the stored events sent up to it and the stream goes on
with the next event, exactly as it would have. A stream of a run resumed after its question starts ``after`` the
last event stored before the answer, the translator fed everything before (so a resumed attempt's repeats are not
sent again).

While it streams, ``allowed`` is asked again every :data:`RECHECK` seconds (the token not revoked, the session not
ended); when it says no, the stream ends with ``RUN_ERROR`` (code ``unauthorized``). A run quiet for
:data:`KEEPALIVE` seconds (queued behind another, a slow model) gets an SSE comment, so no proxy closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from asgiref.sync import sync_to_async
from django.db.models import Q

from robotlab_django import swappable
from robotlab_django.agui.inputs import RunInput
from robotlab_django.agui.positions import END, EVENT, START, Position
from robotlab_django.agui.translate import Events, Translator
from robotlab_django.agui.wire import PROTOCOL_VERSION, event, history_messages, run_uuid, sse_frame
from robotlab_django.protocols import runs as protocol_runs

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["KEEPALIVE", "MAX_HISTORY_RUNS", "RECHECK", "PositionError", "check_position", "frames", "keepalive",
           "start_events"]

logger = logging.getLogger("robotlab_django")

#: Seconds between two checks that the caller may still read the stream.
RECHECK = 5.0
#: The most earlier runs of the thread a ``MESSAGES_SNAPSHOT`` holds (the latest ones).
MAX_HISTORY_RUNS = 200
#: Seconds without an event after which the stream sends an SSE comment (``: keep-alive``), which clients ignore.
KEEPALIVE = 15.0

T = TypeVar("T")


class PositionError(ValueError):
    """A ``Last-Event-ID`` that names no place in this run's stream."""


def _rows(row: RobotResult) -> Q:
    return Q(result_id=row.pk) | Q(result__parent_id=row.pk)


def start_events(row: RobotResult, run_input: RunInput, after: int, agent: str) -> Events:
    """The events an AG-UI run starts with (a resumed run's, ``after`` > 0: no ``MESSAGES_SNAPSHOT``)."""
    about = {"runId": run_uuid(row), "agent": agent, "threadId": run_input.thread_id}
    out = [event("RUN_STARTED", threadId=run_input.thread_id, runId=run_input.run_id,
                 protocolVersion=PROTOCOL_VERSION, metadata={"robotlab": about})]
    if not after:
        earlier = list(swappable.result_model().objects.filter(
            thread_id=row.thread_id, parent__isnull=True, delegated_by="", sequence_number__lt=row.sequence_number)
            .order_by("-sequence_number")[:MAX_HISTORY_RUNS])[::-1]
        mine = {key: value for key, value in (run_input.message or {}).items() if value is not None}
        out.append(event("MESSAGES_SNAPSHOT", messages=history_messages(earlier) + ([mine] if mine else [])))
    state = dict(run_input.state) if isinstance(run_input.state, Mapping) else {}
    out.append(event("STATE_SNAPSHOT", snapshot={**state, "robotlab": about}))
    return out


def check_position(row: RobotResult, position: Position) -> None:
    """Refuse a position that names rows other than ``row`` and its task rows, or an event they do not have.

    Raises:
        PositionError: it names another row, or a missing event.
    """
    mine = {row.pk, *swappable.result_model().objects.filter(parent_id=row.pk).values_list("pk", flat=True)}
    if any(named not in mine for named, _ in position.seen):
        raise PositionError("Last-Event-ID names rows of another run; reconnect with the id of the last event "
                            "received.")
    current = position.current
    if current is not None and not swappable.event_model().objects.filter(pk=current[1], result_id=current[0]).exists():
        raise PositionError("Last-Event-ID names an event this run does not have.")


def _rebuild(translator: Translator, row: RobotResult, after: int, position: Position | None) -> dict[str, Any] | None:
    """Feed ``translator`` the stored events sent before ``position`` (all up to ``after`` first).

    Returns the stored event the position's group was made from (not fed), if it names one.
    """
    seen = position.seen_map() if position is not None and position.group != START else {}
    current = position.current if position is not None else None
    bound = max([after, *seen.values()])
    found: dict[str, Any] | None = None
    primed = not after
    for stored in swappable.event_model().objects.filter(_rows(row), pk__lte=bound).order_by("pk"):
        data = {**stored.to_dict(), "cursor": stored.pk, "result_id": stored.result_id}
        if stored.pk <= after:
            translator.feed(data)
            continue
        if not primed:
            translator.suspend()
            primed = True
        if (stored.result_id, stored.pk) == current:
            found = data
        elif stored.pk <= seen.get(stored.result_id or 0, -1):
            translator.feed(data)
    if not primed:
        translator.suspend()
    if current is not None and found is None:
        raise PositionError("Last-Event-ID names an event this run does not have.")
    return found


async def keepalive(source: AsyncIterator[T], every: float) -> AsyncIterator[T | None]:
    """``source``'s items, and ``None`` whenever ``every`` seconds pass without one (the stream sends a comment)."""
    items = aiter(source)
    pending: asyncio.Future[T] = asyncio.ensure_future(anext(items))
    try:
        while True:
            done, _ = await asyncio.wait({pending}, timeout=every)
            if not done:
                yield None
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            yield item
            pending = asyncio.ensure_future(anext(items))
    finally:
        if not pending.done():
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)


def _pairs(seen: Mapping[int, int], current: int) -> tuple[tuple[int, int], ...]:
    return ((current, seen[current]), *sorted((row, last) for row, last in seen.items() if row != current))


async def frames(row: RobotResult, run_input: RunInput, start: Events, *, after: int = 0,
                 position: Position | None = None,
                 allowed: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[str]:
    """The SSE frames of the AG-UI run ``run_input`` of the stored run ``row``, from ``position`` (else the start).

    Args:
        row: The stored run (a top-level row).
        run_input: The request (its ``threadId`` and ``runId`` are the AG-UI run's).
        start: :func:`start_events` of the run (unused when ``position`` is past the start).
        after: The last event stored before a resumed run's answer (``0`` for a new run).
        position: The ``Last-Event-ID`` of a reconnect: only the events after it.
        allowed: Whether the caller may still read the stream (asked every :data:`RECHECK` seconds).
    """
    loop = asyncio.get_running_loop()
    checked = loop.time()
    translator = Translator(row)
    group = position.group if position is not None else START

    def frame(made: Events, kind: str, at: tuple[tuple[int, int], ...] = (), *, resumes: bool = False) -> list[str]:
        """The frames of ``made``, one group's events (``resumes``: the reconnect's group, sent events left out)."""
        first = position.count if resumes and position is not None else 0
        return [sse_frame(item, str(Position(row.run_id, after, kind, count, at)))
                for count, item in enumerate(made, 1) if count > first]

    try:
        current = await sync_to_async(_rebuild)(translator, row, after, position)
        seen = position.seen_map() if position is not None and group != START else {}
        pending = frame(start, START, resumes=True) if group == START else []
        if current is not None:
            pending += frame(translator.feed(current), EVENT, _pairs(seen, current["result_id"]), resumes=True)
        for text in pending:
            yield text
        if group != END:
            async for stored in keepalive(protocol_runs.afollow_events(row, after=after, seen=seen), KEEPALIVE):
                if allowed is not None and loop.time() - checked >= RECHECK:
                    checked = loop.time()
                    if not await allowed():
                        yield sse_frame(event("RUN_ERROR", code="unauthorized", message="The credentials of this "
                                              "stream were revoked or its session ended; authenticate again."))
                        return
                if stored is None:  # a quiet run: a comment keeps proxies from closing the connection
                    yield ": keep-alive\n\n"
                    continue
                seen[stored["result_id"]] = stored["cursor"]
                for text in frame(translator.feed(stored), EVENT, _pairs(seen, stored["result_id"])):
                    yield text
        settled = await protocol_runs.await_settled(row)
        for text in frame(translator.finish(settled, run_input.thread_id, run_input.run_id), END,
                          tuple(sorted(seen.items())), resumes=group == END):
            yield text
    except Exception:
        logger.exception("robotlab: the AG-UI stream of run %s failed", row.pk)
        yield sse_frame(event("RUN_ERROR", code="server_error", message="The server could not go on with this "
                              "stream; it is logged. Reconnect with the last event's id."))
