"""The rows of a conversation: finding threads, appending numbered runs, storing what a run produced.

A run is one :class:`~robotlab_django.models.RobotResult` row. :func:`start_run` checks the input (the
robot or network must exist, the message must fit), creates the thread when needed and appends a
``queued`` row with the next ``sequence_number``. Numbers are allocated under a row lock on the thread
(``select_for_update``) and the unique ``(thread, sequence_number)`` constraint backs it up (a clash is
retried), so concurrent writers get unique, gap-free numbers. :func:`outcome_fields` turns a
:class:`robotlab.RobotResult` into a row's columns, the one way every finished run (a robot's, a
network's and each of its robots') is stored; :func:`save_row` writes them.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias

from django.db import IntegrityError, models, transaction
from django.db.models import Max
from django.utils import timezone

from robotlab.attachments import coerce_attachments
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.accounting import rate_limits, rollups
from robotlab_django.conf import app_settings
from robotlab_django.encoders import RobotLabJSONEncoder
from robotlab_django.registry import registry
from robotlab_django.runs.attachments import PrivateAttachmentURLError, TooManyAttachmentsError, check_count, check_urls
from robotlab_django.storable import storable, storable_text

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab.result import RobotResult as Result
    from robotlab_django.models import RobotResult, Thread

__all__ = ["APPEND_ATTEMPTS", "AttachmentsTooLargeError", "Outcome", "PrivateAttachmentURLError",
           "TooManyAttachmentsError", "append_result", "append_results", "check_attachments", "check_message",
           "current_worker", "first_execution", "get_thread", "outcome_fields", "reply_text", "save_row", "start_run",
           "store_outcome", "ThreadRef"]

logger = logging.getLogger("robotlab_django")

#: How many times :func:`append_result` retries after a sequence-number clash.
APPEND_ATTEMPTS = 5

_COST_QUANTUM = Decimal("0.00000001")
_UNREAD = object()  # save_row's thread owner when the caller has not read it

#: A thread as the services take it: the row, its primary key, its session id (created when missing), or ``None``
#: for a new one.
ThreadRef: TypeAlias = "Thread | int | str | None"


def get_thread(thread: ThreadRef = None, *, user: _AnyUser | None = None, create: bool = True) -> Thread:
    """The thread meant by ``thread``.

    Args:
        thread: A thread instance; a primary key (``int``); a session id (``str``), created when
            missing unless ``create`` is false; or ``None`` for a new thread.
        user: The owner given to a thread created here.
        create: Whether a missing session id creates a thread.

    Raises:
        ValueError: a session id longer than 255 characters.
        TypeError: an instance of another model than ``THREAD_MODEL``.
        Thread.DoesNotExist: a missing primary key, or a missing session id with ``create=False``.
    """
    model = swappable.thread_model()
    if isinstance(thread, model):
        return thread
    if isinstance(thread, models.Model):
        raise TypeError(f"{type(thread).__name__} is not the thread model ({app_settings.THREAD_MODEL}).")
    owner = user if user is not None and user.is_authenticated else None
    if thread is None:
        return model.objects.create(user=owner)
    if isinstance(thread, int):
        return model.objects.get(pk=thread)
    session_id = storable_text(str(thread))
    if not session_id or len(session_id) > 255:
        raise ValueError(f"A session id has 1 to 255 characters, got {len(session_id)}.")
    if not create:
        return model.objects.get(session_id=session_id)
    found, _created = model.objects.get_or_create(session_id=session_id, defaults={"user": owner})
    return found


def append_result(thread: Thread, **fields: object) -> RobotResult:
    """Insert a result on ``thread`` with the next sequence number and update the thread.

    The thread row is locked (``select_for_update``) while the number is read and the row is
    inserted; a unique-constraint clash (a database without row locks) is retried
    :data:`APPEND_ATTEMPTS` times. The user message in ``fields["input"]`` becomes the thread's
    ``last_user_message`` (and its ``initial_input`` when that is empty).

    Returns:
        The new result row.
    """
    return append_results(thread, [fields])[0]


def append_results(thread: Thread, rows: Sequence[dict[str, Any]], *, stamp: bool = True,
                   savepoint: bool = True) -> list[RobotResult]:
    """Insert ``rows`` (each one result's fields) on ``thread``, numbered in order, as :func:`append_result` does.

    One lock, one read of the last number, one insert and one thread update for all of them: a network turn queues
    its parallel tasks' rows at once. With ``stamp`` false the thread's ``updated_at`` is left alone when nothing
    else of it changes (a distributed turn's task rows leave it to their turn's row, as :func:`save_row` does).
    A clash is retried inside a savepoint when the caller holds a transaction, so the caller's work survives it.
    With ``savepoint`` false no savepoint is sent and a clash is not retried: it fails the caller's transaction
    whole (a distributed turn's commit, whose writers all hold the thread's lock, so that numbers cannot clash).

    Returns:
        The new result rows, in order.
    """
    thread_model = type(thread)
    result_model = swappable.result_model()
    text = next((str(fields["input"]) for fields in reversed(rows) if fields.get("input")), "")
    robot_name = next((fields["robot_name"] for fields in rows if fields.get("robot_name")), "")
    attempts = APPEND_ATTEMPTS if savepoint else 1
    for attempt in range(attempts):
        try:
            with transaction.atomic(savepoint=savepoint), rollups.batch():  # their rollups in one write, locked last
                current = (thread_model.objects.select_for_update().filter(pk=thread.pk)
                           .values("robot_name", "initial_input", "user_id").get())
                last = result_model.objects.filter(thread_id=thread.pk).aggregate(last=Max("sequence_number"))
                base = last["last"] or 0
                # a thread given by its key alone (not read: ``thread._state.adding``) is not cached on the rows
                owner = {"thread_id": thread.pk} if thread._state.adding else {"thread": thread}
                if len(rows) == 1:
                    created = [result_model.objects.create(**owner, sequence_number=base + 1, **rows[0])]
                else:
                    created = result_model.objects.bulk_create([
                        result_model(**owner, sequence_number=base + index, **fields)
                        for index, fields in enumerate(rows, 1)])
                for row in created:
                    rollups.count_new(row, user_id=current["user_id"])
                now = timezone.now()
                updates: dict[str, Any] = {"updated_at": now}
                if text:
                    updates.update(last_user_message=text, last_user_message_at=now)
                    if not current["initial_input"]:
                        updates["initial_input"] = text
                if not current["robot_name"] and robot_name:
                    updates["robot_name"] = robot_name
                if stamp or len(updates) > 1:
                    thread_model.objects.filter(pk=thread.pk).update(**updates)
                for name, value in updates.items():
                    setattr(thread, name, value)
                return created
        except IntegrityError:
            if attempt == attempts - 1:
                raise
            logger.info("robotlab: sequence number clash on thread %s, retrying", thread.pk)
    raise AssertionError("unreachable")  # pragma: no cover


def check_message(message: object) -> str:
    """``message`` as the text a run stores (``""`` for ``None``), storable (a NUL or a lone surrogate replaced).

    The model gets the text the row stores (:func:`~robotlab_django.storable.storable_text`).

    Raises:
        ValueError: it is longer than ``ROBOTLAB["MAX_MESSAGE_LENGTH"]``.
    """
    text = "" if message is None else storable_text(str(message))
    limit = app_settings.MAX_MESSAGE_LENGTH
    if limit is not None and len(text) > limit:
        raise ValueError(f"The message has {len(text)} characters; the limit is {limit} "
                         "(ROBOTLAB['MAX_MESSAGE_LENGTH']).")
    return text


class AttachmentsTooLargeError(ValueError):
    """A run's attachments hold more bytes than ``ROBOTLAB["MAX_ATTACHMENT_BYTES"]``."""


def check_attachments(attachments: object) -> list[dict[str, Any]]:
    """``attachments`` (see :func:`robotlab.attachments.coerce_attachments`) as the JSON a run stores.

    Raises:
        robotlab.AttachmentError: an attachment cannot be sent (also a ``ValueError``).
        AttachmentsTooLargeError: they hold more bytes than ``ROBOTLAB["MAX_ATTACHMENT_BYTES"]``.
        TooManyAttachmentsError: there are more than ``ROBOTLAB["MAX_ATTACHMENTS"]`` files.
        PrivateAttachmentURLError: an image URL's host is not a public address
            (see :mod:`robotlab_django.runs.attachments`).
    """
    check_count(attachments)  # before decoding any, when they come as a list
    files = coerce_attachments(attachments)
    check_count(files)  # a generator is counted once it is read
    check_urls(files)
    limit = app_settings.MAX_ATTACHMENT_BYTES
    total = sum(file.size for file in files)
    if limit is not None and total > limit:
        raise AttachmentsTooLargeError(f"The attachments hold {total} bytes; the limit is {limit} "
                                       "(ROBOTLAB['MAX_ATTACHMENT_BYTES']).")
    return [file.to_dict() for file in files]


def start_run(thread: ThreadRef, robot: object, message: object, *, user: _AnyUser | None = None, task_id: str = "",
              attachments: object = None, limit_rate: bool = False) -> RobotResult:
    """Append a ``queued`` run of ``robot`` on ``thread`` for ``message``; nothing runs yet.

    Nothing is written when the robot is unknown, the message too long or an attachment bad or too large,
    or (``limit_rate``) the user has queued too many runs.

    Args:
        thread: A thread, its primary key, a session id (created when missing) or ``None`` (new).
        robot: A registered robot or network name, or a robot class or function.
        message: The user's message (``None`` continues without one).
        user: The owner of a thread created here.
        task_id: The id of the background task that will run it, if known.
        attachments: Files sent with the message (paths, image URLs, :class:`robotlab.Attachment` objects or
            their ``to_dict()``), stored with the row so whichever worker runs it sends them.
        limit_rate: Count the run against ``user``'s rate limit (:mod:`~.rate_limits`): the doors
            a user sends messages through set it.

    Raises:
        UnknownRobotError: no robot or network has that name.
        ValueError: the message is longer than ``ROBOTLAB["MAX_MESSAGE_LENGTH"]``, an attachment is bad
            (:class:`robotlab.AttachmentError`) or they are too large (:class:`AttachmentsTooLargeError`).
        RateLimitedError: ``limit_rate`` and the user queued ``ROBOTLAB["RUN_RATE_LIMIT"]`` runs in the last
            ``RUN_RATE_PERIOD`` seconds (:class:`robotlab_django.accounting.rate_limits.RateLimitedError`).
    """
    entry = registry.resolve_runnable(robot)
    text = check_message(message)
    files = check_attachments(attachments)
    with transaction.atomic():
        found = get_thread(thread, user=user)
        if limit_rate:
            rate_limits.admit(found, user)
        return append_result(found, robot_name=entry.name, input=text, status=Status.QUEUED, task_id=task_id,
                             attachments=files)


def first_execution(row: RobotResult) -> bool:
    """Whether the claimed ``row`` runs for the first time: claimed once, never parked.

    Nothing was stored under it yet, neither events nor checkpoints, so its run skips reading them. A parked row
    keeps its ``parked_at`` when an answer (or an effect's resolution) queues it again with its attempts reset.
    """
    return int(row.attempts or 0) <= 1 and not row.answers and row.parked_at is None


def current_worker() -> tuple[str, int]:
    """Who runs here: the Celery hostname of the task in progress (else this host's name), and this pid."""
    hostname = None
    try:
        from celery import current_task

        hostname = getattr(getattr(current_task, "request", None), "hostname", None)
    except ImportError:  # pragma: no cover - celery is a dependency of the app
        pass
    return str(hostname or socket.gethostname()), os.getpid()


def reply_text(value: object) -> str:
    """A reply as stored text: strings as they are, structured output as JSON, ``None`` as ``""``."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, cls=RobotLabJSONEncoder, ensure_ascii=False)


def outcome_fields(result: Result, *, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The columns of a completed run from its :class:`robotlab.RobotResult` and the chat ``messages`` it appended."""
    export = result.export()
    return {
        "status": Status.COMPLETED, "reply": reply_text(result.reply), "messages": messages,
        "output_data": export.get("output", []), "tool_calls_data": export.get("tool_calls", []),
        "stop_reason": result.stop_reason or "", "checksum": result.checksum, "model": result.model or "",
        "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
        "cost": Decimal(repr(float(result.cost or 0))).quantize(_COST_QUANTUM),
        "duration": result.duration, "delegated_by": result.delegated_by or "", "error": "", "error_type": "",
        "error_kind": "",
    }


def save_row(row: RobotResult, fields: dict[str, Any], *, savepoint: bool = True,
             thread_user: object = _UNREAD) -> bool:
    """Store a finished run's ``fields`` on ``row`` (and the instance), stamping it and its thread.

    The first end a run reaches wins: a row cancelled meanwhile keeps ``cancelled`` (nothing is written
    and ``False`` is returned; :mod:`robotlab_django.runs.watch` stores what the run produced). A task row of a
    network turn (it has a ``parent``) leaves the thread's stamp to its turn's row. The values are made storable
    (:func:`~robotlab_django.storable.storable`) first, so the instance and the usage rollups hold the stored text.

    Args:
        row: The run's row.
        fields: Its columns to store.
        savepoint: Take a savepoint when called inside a transaction (``False``: the caller's transaction fails
            whole if this does, and no savepoint is sent).
        thread_user: Its thread owner's primary key, read in this job, when the instance holds the row's counted
            columns as stored (read or inserted in this job): the usage rollups then move without reading the row
            (:func:`~robotlab_django.accounting.rollups.update_known`).
    """
    now = timezone.now()
    fields.update({name: storable(value) for name, value in fields.items()}, finished_at=now, updated_at=now)
    rows = type(row).objects.filter(pk=row.pk).exclude(status=Status.CANCELLED)
    with transaction.atomic(savepoint=savepoint), rollups.batch():  # the rollups are locked last (rollups.batch)
        stored = rollups.update_rows(rows, **fields) if thread_user is _UNREAD else rollups.update_known(
            rows, rollups.values_of(row, thread_user), **fields)
        if not stored:
            row.status = Status.CANCELLED
            return False
        if getattr(row, "parent_id", None) is None:
            swappable.thread_model().objects.filter(pk=row.thread_id).update(updated_at=now)
    for name, value in fields.items():
        setattr(row, name, value)
    return True


@dataclass
class Outcome:
    """What a finished run stores: its row's columns, and the rows of the runs it delegated to.

    Attributes:
        fields: The run's own columns (``status``, ``reply``, ``messages``, usage...).
        delegated: One dict of columns per delegated run (a network's robots), appended to the
            thread before the run's own row is saved.
    """

    fields: dict[str, Any]
    delegated: list[dict[str, Any]] = field(default_factory=list)


def store_outcome(row: RobotResult, outcome: Outcome) -> bool:
    """Store ``outcome`` on ``row`` in one transaction: its delegated rows first, then the row itself.

    Returns ``False``, storing nothing, when the row was cancelled before it could finish (the row is
    locked by the first update, so a cancel either lands before it, and wins, or waits and finds the run
    finished).
    """
    with transaction.atomic(), rollups.batch():
        if not type(row).objects.filter(pk=row.pk).exclude(status=Status.CANCELLED).update(
                updated_at=timezone.now()):
            row.status = Status.CANCELLED
            return False
        if outcome.delegated:
            thread = swappable.thread_model().objects.get(pk=row.thread_id)
            for columns in outcome.delegated:
                append_result(thread, **columns)
        return save_row(row, outcome.fields)
