"""Running robots on threads and persisting what they did: the one place that writes runs.

A run is one :class:`~robotlab_django.models.RobotResult` row, in two steps:

1. :func:`start_run` checks the input (the robot must exist, the message must fit), creates the
   thread when needed and appends a ``queued`` row with the next ``sequence_number``. Numbers
   are allocated under a row lock on the thread (``select_for_update``) and the unique
   ``(thread, sequence_number)`` constraint backs it up (a clash is retried), so concurrent
   writers get unique, gap-free numbers.
2. :func:`execute_run` claims the row with a conditional update (a second worker given the same
   row does nothing), builds a fresh robot, restores the thread's history into it, runs it
   without holding any lock, and stores the reply, the messages the run appended, tokens, cost,
   duration, or the error. Each LLM call and tool call of the run is checkpointed as it completes
   (:mod:`robotlab_django.checkpoints`), so an execution after a lost worker replays them.

:func:`run_robot` does both now; :func:`arun_robot` is its async twin. Views, commands, jobs and
the admin call these functions; nothing else writes results. A run whose robot name is a registered
network runs that network instead (:mod:`robotlab_django.networks`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, models, transaction
from django.db.models import F, Max
from django.utils import timezone

from robotlab.errors import RobotLabError

from . import checkpoints, streaming
from .abstract_models import Status
from .conf import app_settings
from .encoders import RobotLabJSONEncoder
from .history import load_history
from .registry import registry

__all__ = [
    "APPEND_ATTEMPTS",
    "NothingToRerunError",
    "RunFailedError",
    "append_result",
    "aexecute_run",
    "arun_robot",
    "build_robot",
    "execute_run",
    "get_thread",
    "rerun_last_user_message",
    "restore_robot",
    "run_robot",
    "start_run",
]

logger = logging.getLogger("robotlab_django")

#: How many times :func:`append_result` retries after a sequence-number clash.
APPEND_ATTEMPTS = 5

_COST_QUANTUM = Decimal("0.00000001")


class RunFailedError(RobotLabError, RuntimeError):
    """A robot run failed; ``result`` is the stored (``failed``) row and ``__cause__`` the error."""

    def __init__(self, result: Any) -> None:
        self.result = result
        super().__init__(f"Robot '{result.robot_name}' failed on thread {result.thread_id} "
                         f"(run #{result.sequence_number}): {result.error_type}: {result.error}")


class NothingToRerunError(RobotLabError, ValueError):
    """The thread has no user message to run again."""


# -- robots ------------------------------------------------------------------------------
def build_robot(robot: Any, *, llm: Any = None, **options: Any) -> Any:
    """A fresh robot from the registry, with the app's settings applied.

    Args:
        robot: A registered name (``"support"``), or the class or function registered for it.
        llm: The LLM to send requests to; defaults to ``ROBOTLAB["LLM"]``, else a litellm client
            with ``API_BASE``/``REQUEST_TIMEOUT``/``LLM_MAX_RETRIES`` when any is set.
        options: Passed to the robot's factory (``on_content=``, ``model=``...).

    ``ROBOTLAB["DEFAULT_MODEL"]`` and ``["MAX_TOOL_ROUNDS"]`` fill in what the robot leaves unset.

    Raises:
        UnknownRobotError: no robot has that name.
    """
    entry = registry.resolve(robot)
    llm = _app_llm() if llm is None else llm
    if llm is not None:
        options["llm"] = llm
    return _apply_defaults(entry.build(**options))


def _app_llm() -> Any:
    """The LLM of app-built robots: ``ROBOTLAB["LLM"]()``, else a litellm client with the connection
    settings when any is set, else ``None`` (the robot's own)."""
    factory = app_settings.llm_factory()
    if factory is not None:
        return factory()
    if app_settings.llm_client_options():
        from robotlab.llm import LLMClient

        return LLMClient(**app_settings.llm_client_options())
    return None


def _apply_defaults(built: Any) -> Any:
    """``ROBOTLAB["DEFAULT_MODEL"]`` and ``["MAX_TOOL_ROUNDS"]`` where the robot left them unset."""
    default_model = app_settings.DEFAULT_MODEL
    if default_model and built.config.model is None:
        built.with_model(default_model)
    max_rounds = app_settings.MAX_TOOL_ROUNDS
    if max_rounds is not None and built.config.max_tool_rounds is None:
        built.config.set("max_tool_rounds", max_rounds)
    return built


def restore_robot(thread: Any, robot: Any = None, *, llm: Any = None, **options: Any) -> Any:
    """A fresh robot holding ``thread``'s history, ready to continue the conversation.

    Args:
        thread: A thread, its primary key or its session id.
        robot: The robot to build; defaults to the thread's robot.
    """
    thread = get_thread(thread, create=False)
    built = build_robot(robot or thread.robot_name, llm=llm, **options)
    built.replace_messages(load_history(thread))
    return built


# -- threads -----------------------------------------------------------------------------
def get_thread(thread: Any = None, *, user: Any = None, create: bool = True) -> Any:
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
    model = app_settings.thread_model()
    if isinstance(thread, model):
        return thread
    if isinstance(thread, models.Model):
        raise TypeError(f"{type(thread).__name__} is not the thread model ({app_settings.THREAD_MODEL}).")
    owner = user if getattr(user, "is_authenticated", False) else None
    if thread is None:
        return model.objects.create(user=owner)
    if isinstance(thread, int):
        return model.objects.get(pk=thread)
    session_id = str(thread)
    if not session_id or len(session_id) > 255:
        raise ValueError(f"A session id has 1 to 255 characters, got {len(session_id)}.")
    if not create:
        return model.objects.get(session_id=session_id)
    found, _created = model.objects.get_or_create(session_id=session_id, defaults={"user": owner})
    return found


def append_result(thread: Any, **fields: Any) -> Any:
    """Insert a result on ``thread`` with the next sequence number and update the thread.

    The thread row is locked (``select_for_update``) while the number is read and the row is
    inserted; a unique-constraint clash (a database without row locks) is retried
    :data:`APPEND_ATTEMPTS` times. The user message in ``fields["input"]`` becomes the thread's
    ``last_user_message`` (and its ``initial_input`` when that is empty).

    Returns:
        The new result row.
    """
    thread_model = type(thread)
    result_model = app_settings.result_model()
    text = fields.get("input") or ""
    for attempt in range(APPEND_ATTEMPTS):
        try:
            with transaction.atomic():
                current = (thread_model.objects.select_for_update().filter(pk=thread.pk)
                           .values("robot_name", "initial_input").get())
                last = result_model.objects.filter(thread_id=thread.pk).aggregate(last=Max("sequence_number"))
                row = result_model.objects.create(thread=thread, sequence_number=(last["last"] or 0) + 1, **fields)
                now = timezone.now()
                updates: dict[str, Any] = {"updated_at": now}
                if text:
                    updates.update(last_user_message=text, last_user_message_at=now)
                    if not current["initial_input"]:
                        updates["initial_input"] = text
                if not current["robot_name"] and fields.get("robot_name"):
                    updates["robot_name"] = fields["robot_name"]
                thread_model.objects.filter(pk=thread.pk).update(**updates)
                for name, value in updates.items():
                    setattr(thread, name, value)
                return row
        except IntegrityError:
            if attempt == APPEND_ATTEMPTS - 1:
                raise
            logger.info("robotlab: sequence number clash on thread %s, retrying", thread.pk)
    raise AssertionError("unreachable")  # pragma: no cover


def _check_message(message: Any) -> str:
    text = "" if message is None else str(message)
    limit = app_settings.MAX_MESSAGE_LENGTH
    if limit is not None and len(text) > limit:
        raise ValueError(f"The message has {len(text)} characters; the limit is {limit} "
                         "(ROBOTLAB['MAX_MESSAGE_LENGTH']).")
    return text


def start_run(thread: Any, robot: Any, message: Any, *, user: Any = None, task_id: str = "") -> Any:
    """Append a ``queued`` run of ``robot`` on ``thread`` for ``message``; nothing runs yet.

    Nothing is written when the robot is unknown or the message too long.

    Args:
        thread: A thread, its primary key, a session id (created when missing) or ``None`` (new).
        robot: A registered robot or network name, or a robot class or function.
        message: The user's message (``None`` continues without one).
        user: The owner of a thread created here.
        task_id: The id of the background task that will run it, if known.

    Raises:
        UnknownRobotError: no robot or network has that name.
        ValueError: the message is longer than ``ROBOTLAB["MAX_MESSAGE_LENGTH"]``.
    """
    entry = registry.resolve_runnable(robot)
    text = _check_message(message)
    with transaction.atomic():
        found = get_thread(thread, user=user)
        return append_result(found, robot_name=entry.name, input=text, status=Status.QUEUED, task_id=task_id)


# -- executing ---------------------------------------------------------------------------
def _load(result: Any) -> Any:
    model = app_settings.result_model()
    return result if isinstance(result, model) else model.objects.get(pk=result)


def _claim(row: Any) -> bool:
    """Mark a queued row running; ``False`` when another worker already took it."""
    now = timezone.now()
    claimed = type(row).objects.filter(pk=row.pk, status__in=[Status.QUEUED, Status.RETRYING]).update(
        status=Status.RUNNING, attempts=F("attempts") + 1, started_at=now, updated_at=now)
    if not claimed:
        row.refresh_from_db()
        return False
    row.status, row.started_at, row.attempts = Status.RUNNING, now, row.attempts + 1
    return True


def _prepare(row: Any, llm: Any, options: Mapping[str, Any]) -> tuple[Any, int]:
    robot = build_robot(row.robot_name, llm=llm, **dict(options))
    history = load_history(row.thread_id, before=row.sequence_number)
    robot.replace_messages(history)
    checkpoints.attach(robot, row)  # an execution after a lost worker replays the steps already done
    return robot, len(history)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, cls=RobotLabJSONEncoder, ensure_ascii=False)


def _save(row: Any, fields: dict[str, Any]) -> None:
    now = timezone.now()
    fields.update(finished_at=now, updated_at=now)
    type(row).objects.filter(pk=row.pk).update(**fields)
    app_settings.thread_model().objects.filter(pk=row.thread_id).update(updated_at=now)
    for name, value in fields.items():
        setattr(row, name, value)


def _finish_completed(row: Any, result: Any, appended: list[dict[str, Any]]) -> None:
    export = result.export()
    _save(row, {
        "status": Status.COMPLETED, "reply": _text(result.reply), "messages": appended,
        "output_data": export.get("output", []), "tool_calls_data": export.get("tool_calls", []),
        "stop_reason": result.stop_reason or "", "checksum": result.checksum, "model": result.model or "",
        "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
        "cost": Decimal(repr(float(result.cost or 0))).quantize(_COST_QUANTUM),
        "duration": result.duration, "delegated_by": result.delegated_by or "", "error": "", "error_type": "",
    })


def _finish_failed(row: Any, error: BaseException, robot: Any, history_length: int, started: float) -> None:
    fields: dict[str, Any] = {
        "status": Status.FAILED, "error": str(error) or type(error).__name__,
        "error_type": type(error).__name__, "duration": time.monotonic() - started,
    }
    if robot is not None:
        fields.update(messages=robot.messages[history_length:], input_tokens=robot.total_input_tokens,
                      output_tokens=robot.total_output_tokens)
    _save(row, fields)
    if robot is None:  # it failed before streaming anything: tell the watchers
        streaming.publish_failure(row, fields["error"], fields["error_type"])
    logger.warning("robotlab: robot %r failed on thread %s: %s: %s", row.robot_name, row.thread_id,
                   fields["error_type"], fields["error"])


def _starter(robot: Any, row: Any) -> Callable[[Callable[[Any], None]], Any]:
    """The robot coroutine of ``row``'s run, given the event callback (see :mod:`.streaming`)."""
    return lambda on_event: robot.arun(row.input or None, run_id=row.run_id, on_event=on_event)


def execute_run(result: Any, *, llm: Any = None, robot_options: Mapping[str, Any] | None = None,
                on_event: Callable[[Any], Any] | None = None, raise_errors: bool = True) -> Any:
    """Run a queued result: claim it, build the robot with the thread's history, run, store.

    Args:
        result: The row or its primary key.
        llm: The LLM to use (see :func:`build_robot`).
        robot_options: More options for the robot's factory.
        on_event: Receives every :class:`robotlab.streaming.Event` of the run.
        raise_errors: Raise :class:`RunFailedError` when the run fails (the row is stored as
            ``failed`` either way).

    Returns:
        The row, ``completed`` or ``failed``; unchanged when another worker had claimed it.
    """
    row = _load(result)
    if not _claim(row):
        return row
    if registry.is_network(row.robot_name):
        from .networks import execute_network_run

        return execute_network_run(row, llm=llm, options=robot_options or {}, on_event=on_event,
                                   raise_errors=raise_errors)
    started = time.monotonic()
    robot, history_length = None, 0
    try:
        robot, history_length = _prepare(row, llm, robot_options or {})
        outcome = streaming.stream_run(row.thread_id, row.pk, _starter(robot, row), on_event=on_event)
    except Exception as exc:
        _finish_failed(row, exc, robot, history_length, started)
        if raise_errors:
            raise RunFailedError(row) from exc
        return row
    _finish_completed(row, outcome, robot.messages[history_length:])
    return row


async def aexecute_run(result: Any, *, llm: Any = None, robot_options: Mapping[str, Any] | None = None,
                       on_event: Callable[[Any], Any] | None = None, raise_errors: bool = True) -> Any:
    """The async :func:`execute_run`: database work in a thread, the robot on the event loop."""
    row = await sync_to_async(_load)(result)
    if not await sync_to_async(_claim)(row):
        return row
    if await sync_to_async(registry.is_network)(row.robot_name):
        from .networks import aexecute_network_run

        return await aexecute_network_run(row, llm=llm, options=robot_options or {}, on_event=on_event,
                                          raise_errors=raise_errors)
    started = time.monotonic()
    robot, history_length = None, 0
    try:
        robot, history_length = await sync_to_async(_prepare)(row, llm, robot_options or {})
        outcome = await streaming.astream_run(row.thread_id, row.pk, _starter(robot, row), on_event=on_event)
    except Exception as exc:
        await sync_to_async(_finish_failed)(row, exc, robot, history_length, started)
        if raise_errors:
            raise RunFailedError(row) from exc
        return row
    await sync_to_async(_finish_completed)(row, outcome, robot.messages[history_length:])
    return row


def run_robot(thread: Any, robot: Any, message: Any, *, user: Any = None, llm: Any = None,
              robot_options: Mapping[str, Any] | None = None, on_event: Callable[[Any], Any] | None = None,
              task_id: str = "", raise_errors: bool = True) -> Any:
    """Run ``robot`` on ``thread`` with ``message`` now, continuing the thread's conversation.

    ``run_robot("session-1", "support", "Where is my order?")`` creates the thread if needed,
    restores its history into a fresh ``support`` robot, runs it and returns the stored
    :class:`~robotlab_django.models.RobotResult` row (``reply``, tokens, cost, ...).

    Raises:
        UnknownRobotError: no robot has that name (nothing is written).
        ValueError: the message is too long (nothing is written).
        RunFailedError: the robot failed (the row is stored as ``failed``); not with ``raise_errors=False``.
    """
    row = start_run(thread, robot, message, user=user, task_id=task_id)
    return execute_run(row, llm=llm, robot_options=robot_options, on_event=on_event, raise_errors=raise_errors)


async def arun_robot(thread: Any, robot: Any, message: Any, *, user: Any = None, llm: Any = None,
                     robot_options: Mapping[str, Any] | None = None, on_event: Callable[[Any], Any] | None = None,
                     task_id: str = "", raise_errors: bool = True) -> Any:
    """The async :func:`run_robot`."""
    row = await sync_to_async(start_run)(thread, robot, message, user=user, task_id=task_id)
    return await aexecute_run(row, llm=llm, robot_options=robot_options, on_event=on_event,
                              raise_errors=raise_errors)


def rerun_last_user_message(thread: Any) -> Any:
    """Queue the thread's last user message again, for the same robot, and dispatch it.

    The new run goes through the configured executor (``ROBOTLAB["EXECUTOR"]``).

    Returns:
        The new result row (already finished with the ``sync`` executor).

    Raises:
        NothingToRerunError: the thread has no run with a user message.
        UnknownRobotError: that robot is no longer registered (nothing is written).
    """
    from . import executor

    thread = get_thread(thread, create=False)
    last = (app_settings.result_model().objects.filter(thread_id=thread.pk, delegated_by="").exclude(input="")
            .order_by("-sequence_number").only("robot_name", "input").first())
    if last is None:
        raise NothingToRerunError(f"Thread {thread.session_id} has no user message to re-run.")
    row = start_run(thread, last.robot_name, last.input)
    executor.dispatch(row)
    return row
