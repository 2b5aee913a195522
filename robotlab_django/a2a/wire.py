"""The A2A shapes of the app's rows: a run as a ``Task``, its question and reply as messages and artifacts.

A task is a run (:class:`~robotlab_django.models.RobotResult`): its id is the run id as a UUID, its context id
the thread's session id. The reply is the artifact ``reply``; a pending question is the ``input-required``
status's message; a failure's public message is the ``failed`` status's message.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from robotlab.attachments import Attachment
from robotlab.errors import AttachmentError
from robotlab_django.abstract_models import Status
from robotlab_django.runs.user_errors import public_error

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["REPLY_ARTIFACT", "STATES", "TERMINAL", "artifact_update", "input_content", "parse_task_id", "status_update",
           "task_id", "task_of"]

#: The A2A task state of each row status.
STATES: dict[str, TaskState] = {
    str(Status.QUEUED): TaskState.TASK_STATE_SUBMITTED, str(Status.RUNNING): TaskState.TASK_STATE_WORKING,
    str(Status.RETRYING): TaskState.TASK_STATE_WORKING, str(Status.AWAITING): TaskState.TASK_STATE_INPUT_REQUIRED,
    str(Status.COMPLETED): TaskState.TASK_STATE_COMPLETED, str(Status.FAILED): TaskState.TASK_STATE_FAILED,
    str(Status.SKIPPED): TaskState.TASK_STATE_FAILED, str(Status.CANCELLED): TaskState.TASK_STATE_CANCELED,
}

#: The task states a task does not leave.
TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
                      TaskState.TASK_STATE_REJECTED})

#: The id of the artifact that holds a run's reply.
REPLY_ARTIFACT = "reply"


def task_id(row: RobotResult) -> str:
    """The A2A task id of ``row``: its run id as a UUID."""
    return str(uuid.UUID(row.run_id))


def parse_task_id(value: str) -> str | None:
    """The stored run id (32 hex characters) of a task id (a UUID), or ``None`` if it is not a UUID."""
    try:
        return uuid.UUID(value).hex
    except ValueError:
        return None


def input_content(message: Message) -> tuple[str, list[Attachment]]:
    """The text of an incoming message (its text parts joined by newlines) and its files.

    A ``raw`` part (bytes with a ``media_type``) or a ``url`` part (an ``http(s)`` image URL, or a ``data:``
    URL) becomes a :class:`robotlab.Attachment` the model sees, named by the part's ``filename``.

    Raises:
        ValueError: it has no parts, a ``data`` or empty part, or a file the model cannot take (the message
            names the part and why).
    """
    if not message.parts:
        raise ValueError("The message has no parts; send at least one text part.")
    texts: list[str] = []
    files: list[Attachment] = []
    for index, part in enumerate(message.parts, 1):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
            continue
        name = part.filename or None
        try:
            if kind == "raw":
                files.append(Attachment(data=part.raw, mime_type=part.media_type or None, name=name))
            elif kind == "url" and part.url.startswith("data:"):
                files.append(Attachment.from_data_url(part.url, name=name))
            elif kind == "url" and part.url.startswith(("http://", "https://")):
                files.append(Attachment(url=part.url, mime_type=part.media_type or None, name=name))
            elif kind == "url":
                raise ValueError(f"Part {index}: a file's url must be an http(s) or data: URL.")
            else:
                raise ValueError(f"Part {index}: unsupported {kind or 'empty'} part; send text, raw or url parts.")
        except AttachmentError as exc:
            raise ValueError(f"Part {index}: {exc}.") from None
    return "\n".join(texts), files


def _message(text: str, role: Role, row: RobotResult, context_id: str, key: str,
             metadata: dict[str, Any] | None = None) -> Message:
    message = Message(message_id=f"{task_id(row)}-{key}", context_id=context_id, task_id=task_id(row), role=role,
                      parts=[Part(text=text)])
    if metadata:
        message.metadata.update(metadata)
    return message


def _question_text(question: dict[str, Any]) -> str:
    text = str(question.get("question") or "")
    choices = [str(choice) for choice in question.get("choices") or []]
    if choices:
        text += "\n" + "\n".join(f"{number}. {choice}" for number, choice in enumerate(choices, 1))
    return text


def _status(row: RobotResult, context_id: str) -> TaskStatus:
    state = STATES.get(row.status, TaskState.TASK_STATE_WORKING)
    status = TaskStatus(state=state)
    if state == TaskState.TASK_STATE_INPUT_REQUIRED and row.question:
        question = dict(row.question)
        metadata = {key: question[key] for key in ("request_id", "choices", "default") if question.get(key)}
        if question.get("type") == "approval":  # a tool call to approve: the call, and what it changes
            metadata.update({key: question.get(key) or {} for key in ("arguments", "details")},
                            type="approval", tool=str(question.get("tool") or ""))
        status.message.CopyFrom(_message(_question_text(question), Role.ROLE_AGENT, row, context_id,
                                         f"ask-{len(row.answers or [])}", metadata))
    elif state == TaskState.TASK_STATE_FAILED:
        _, error = public_error(row.error_type, row.error, row.error_kind)
        status.message.CopyFrom(_message(error or "The run failed.", Role.ROLE_AGENT, row, context_id, "error"))
    stamp = row.finished_at or row.updated_at
    if stamp is not None:
        status.timestamp.FromDatetime(stamp)
    return status


def _history(row: RobotResult, context_id: str) -> Iterable[Message]:
    yield _message(row.input or "", Role.ROLE_USER, row, context_id, "input")
    for number, answered in enumerate(row.answers or []):
        question = {"question": answered.get("question")}
        yield _message(_question_text(question), Role.ROLE_AGENT, row, context_id, f"ask-{number}")
        yield _message(str(answered.get("answer") or ""), Role.ROLE_USER, row, context_id, f"answer-{number}")


def task_of(row: RobotResult, context_id: str) -> Task:
    """The ``Task`` of ``row`` (on the thread with session id ``context_id``): status, history, reply artifact."""
    task = Task(id=task_id(row), context_id=context_id, status=_status(row, context_id),
                history=list(_history(row, context_id)))
    task.metadata.update({"agent": row.robot_name})
    if row.reply:
        task.artifacts.append(Artifact(artifact_id=REPLY_ARTIFACT, name=REPLY_ARTIFACT, parts=[Part(text=row.reply)]))
    return task


def status_update(row: RobotResult, context_id: str, state: TaskState | None = None) -> TaskStatusUpdateEvent:
    """A ``TaskStatusUpdateEvent`` with ``row``'s status (or just ``state``)."""
    status = TaskStatus(state=state) if state is not None else _status(row, context_id)
    return TaskStatusUpdateEvent(task_id=task_id(row), context_id=context_id, status=status)


def artifact_update(row: RobotResult, context_id: str, artifact_id: str, text: str, *, append: bool,
                    last_chunk: bool = False) -> TaskArtifactUpdateEvent:
    """A ``TaskArtifactUpdateEvent`` carrying ``text`` for the artifact ``artifact_id`` (appended unless first)."""
    artifact = Artifact(artifact_id=artifact_id, name=artifact_id, parts=[Part(text=text)])
    return TaskArtifactUpdateEvent(task_id=task_id(row), context_id=context_id, append=append, last_chunk=last_chunk,
                                   artifact=artifact)
