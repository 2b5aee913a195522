"""The A2A request handler: the SDK's :class:`~a2a.server.request_handlers.RequestHandler` on the app's runs.

Every method works on the run rows (:mod:`robotlab_django.protocols.runs`), never on state held in this process:
a task is a run executed by the configured executor (a Celery worker included), waiting and streaming read its
row and stored events, so any web process answers for any task, a parked task holds no process, and a
restart loses nothing. The SDK's JSON-RPC dispatcher calls it (:mod:`robotlab_django.a2a.views`) and gives it
the caller (an API token's user) and the agent (the robot or network of the URL) in the call context.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING, NoReturn

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler, validate_request_params
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length
from asgiref.sync import sync_to_async
from django.db import DatabaseError

from robotlab_django import swappable
from robotlab_django.a2a import push
from robotlab_django.a2a.events import A2A_EVENTS
from robotlab_django.a2a.wire import (
    REPLY_ARTIFACT,
    STATES,
    TERMINAL,
    artifact_update,
    input_content,
    parse_task_id,
    status_update,
    task_of,
)
from robotlab_django.accounting.rate_limits import RateLimitedError
from robotlab_django.conf import app_settings
from robotlab_django.protocols import runs as protocol_runs
from robotlab_django.protocols.push import WebhookURLError, check_url
from robotlab_django.registry import UnknownRobotError
from robotlab_django.runs.control import BadAnswerError, NotAwaitingError, RunFinishedError
from robotlab_django.streaming.streamed_text import Chunk, StreamedText

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

    from robotlab_django.models import RobotResult

__all__ = ["AGENT", "RATE_LIMITED", "USER", "RobotLabRequestHandler", "RunRateLimitError"]

logger = logging.getLogger("robotlab_django")

#: The call context's ``state`` key of the agent (robot or network name) the request addresses.
AGENT = "robotlab.agent"
#: The call context's ``state`` key of the Django user the request's token belongs to.
USER = "robotlab.user"

#: Tasks a ``ListTasks`` page holds when the request sets no page size, and at most.
PAGE_SIZE, MAX_PAGE_SIZE = 50, 100

#: JSON-RPC error code of a message that would start a run past the user's rate limit
#: (:mod:`robotlab_django.accounting.rate_limits`): HTTP's number, as the views' ``-32401`` for a missing token. A2A
#: assigns back-pressure no code of its own.
RATE_LIMITED = -32429


class RunRateLimitError(A2AError):
    """A message that would start a run past the user's rate limit; ``data["retry_after"]``: seconds to wait.

    The SDK's dispatcher answers it as the JSON-RPC error :data:`RATE_LIMITED` (reason ``RATE_LIMITED``);
    protocol 0.3 has no such code, so a 0.3 client gets ``-32603`` with the same message and data.
    """

    message = "Too many runs; try again later."


def _register_rate_limit_error() -> None:
    """Teach the SDK's JSON-RPC error tables :class:`RunRateLimitError` (they map error classes, not bases)."""
    from a2a.server.jsonrpc_models import JSONRPCError
    from a2a.server.request_handlers import response_helpers
    from a2a.utils import errors

    errors.JSON_RPC_ERROR_CODE_MAP.setdefault(RunRateLimitError, RATE_LIMITED)
    errors.A2A_ERROR_REASONS.setdefault(RunRateLimitError, "RATE_LIMITED")
    response_helpers.EXCEPTION_MAP.setdefault(RunRateLimitError, JSONRPCError)


_register_rate_limit_error()


def _caller(context: ServerCallContext) -> tuple[_User, str]:
    return context.state[USER], str(context.state[AGENT])


def _session_id(row: RobotResult) -> str:
    """The context id of ``row``'s thread, as its owner knows it."""
    return protocol_runs.public_session_id(swappable.thread_model().objects.only("session_id", "user_id")
                                           .get(pk=row.thread_id))


def _invalid(message: str) -> NoReturn:
    raise InvalidParamsError(message=message)


def _refused(exc: WebhookURLError) -> NoReturn:
    """A webhook URL the settings do not allow: not supported at all when push notifications are off."""
    if not app_settings.A2A_PUSH_URLS:
        raise PushNotificationNotSupportedError(message=str(exc)) from None
    raise InvalidParamsError(message=f"Webhook refused: {exc}") from None


class RobotLabRequestHandler(RequestHandler):
    """The SDK's request handler on the caller's runs of one agent.

    It serves ``SendMessage`` (``message/send``), ``SendStreamingMessage`` (``message/stream``), ``GetTask``,
    ``ListTasks``, ``CancelTask``, ``SubscribeToTask`` and the push-notification configs' operations
    (:mod:`robotlab_django.a2a.push`).

    A message without a task id starts a run (on the thread its context id names, created if new; a new
    thread without one); a message with the id of an ``input-required`` task answers that task's question and
    the run goes on. The extended card is not offered.
    """

    async def _owned(self, task_id: str, context: ServerCallContext) -> RobotResult:
        """The caller's run of this agent with ``task_id``; ``TaskNotFoundError`` for any other id."""
        user, agent = _caller(context)
        stored = parse_task_id(task_id)
        row = await sync_to_async(protocol_runs.find_run)(stored, user) if stored else None
        if row is None or row.robot_name != agent or row.parent_id is not None:
            raise TaskNotFoundError(message=f"No task {task_id}.")
        return row

    async def _start(self, params: SendMessageRequest, context: ServerCallContext) -> tuple[RobotResult, str, int]:
        """Start a run for the message, or answer the task it names.

        Returns the row, its context id, and the last event stored before it went on.
        """
        user, agent = _caller(context)
        message: Message = params.message
        validate_history_length(params.configuration)
        try:
            text, files = input_content(message)
        except ValueError as exc:
            _invalid(str(exc))
        if message.task_id:
            row = await self._owned(message.task_id, context)
            context_id = protocol_runs.public_session_id(row.thread)
            if message.context_id and message.context_id != context_id:
                _invalid(f"Context {message.context_id} is not the context {context_id} of task {message.task_id}.")
            if files:
                _invalid("A follow-up message answers the task's question with text; send files in a new message.")
            after = await protocol_runs.last_event_pk(row)
            try:
                row = await protocol_runs.aanswer(row, text, user)
            except BadAnswerError as exc:  # a tool call to approve takes "approve" or "deny"
                _invalid(str(exc))
            except NotAwaitingError:
                state = TaskState.Name(STATES.get(row.status, TaskState.TASK_STATE_WORKING))
                _invalid(f"Task {message.task_id} is {state}, not input-required: only a question takes a follow-up "
                         f"message. Send a new message on context {context_id} (no task id) to go on.")
            return row, context_id, after
        webhook = params.configuration.task_push_notification_config if params.HasField("configuration") and \
            params.configuration.HasField("task_push_notification_config") else None
        if webhook is not None:  # refused before anything runs; stored with the row, before it is dispatched
            try:
                await sync_to_async(check_url)(webhook.url)
            except WebhookURLError as exc:
                _refused(exc)
        try:
            row = await sync_to_async(protocol_runs.start_for_user)(
                user, agent, text, message.context_id or None, attachments=files,
                on_stored=None if webhook is None else lambda stored: push.create_config(stored, user, webhook))
        except RateLimitedError as exc:
            raise RunRateLimitError(message=str(exc), data={"retry_after": str(exc.retry_after)}) from None
        except protocol_runs.SessionTakenError:
            _invalid(f"No context {message.context_id}.")
        except UnknownRobotError as exc:
            raise TaskNotFoundError(message=str(exc)) from None
        except ValueError as exc:
            _invalid(str(exc))
        except DatabaseError:  # logged; the database's own message is not the client's to read
            logger.exception("robotlab: A2A could not start a run of %r", agent)
            raise InternalError(message="The server could not store this message; it is logged.") from None
        return row, await sync_to_async(_session_id)(row), 0

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        """Start or answer a run; its task once it completes, fails, is cancelled or asks.

        With ``return_immediately``, the task at once.
        """
        row, context_id, _ = await self._start(params, context)
        if not params.configuration.return_immediately:
            row = await protocol_runs.await_settled(row)
        return apply_history_length(task_of(row, context_id), params.configuration)

    @validate_request_params
    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Event, None]:
        """Start or answer a run and stream it.

        The task, ``working``, the reply's text deltas as chunks of the artifact ``reply`` (a network task's as
        ``task-<name>``), then the final status (its message the question of an ``input-required`` task).
        """
        row, context_id, after = await self._start(params, context)
        async for event in self._follow(row, context_id, after):
            yield event

    async def _follow(self, row: RobotResult, context_id: str, after: int) -> AsyncGenerator[Event, None]:
        yield task_of(row, context_id)
        yield status_update(row, context_id, TaskState.TASK_STATE_WORKING)
        streamed: set[str] = set()
        text = StreamedText(row.pk, A2A_EVENTS)  # a lost worker's new attempt sends no text twice

        def chunks(sent: list[Chunk]) -> Iterator[Event]:
            for chunk in sent:
                artifact = f"task-{chunk.task}" if chunk.task else REPLY_ARTIFACT
                yield artifact_update(row, context_id, artifact, chunk.text,
                                      append=artifact in streamed and not chunk.replace)
                streamed.add(artifact)

        async for event in protocol_runs.afollow_events(row, after=after):
            for update in chunks(text.feed(event)):
                yield update
        for update in chunks(text.close()):
            yield update
        row = await protocol_runs.await_settled(row)
        if row.reply and REPLY_ARTIFACT not in streamed:  # a network's reply, streamed by its tasks
            yield artifact_update(row, context_id, REPLY_ARTIFACT, row.reply, append=False, last_chunk=True)
        yield status_update(row, context_id)

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The caller's task; ``TaskNotFoundError`` for another user's or agent's."""
        validate_history_length(params)
        row = await self._owned(params.id, context)
        return apply_history_length(task_of(row, protocol_runs.public_session_id(row.thread)), params)

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """Cancel a submitted, working or input-required task; ``TaskNotCancelableError`` for a finished one."""
        user, _ = _caller(context)
        row = await self._owned(params.id, context)
        context_id = protocol_runs.public_session_id(row.thread)
        try:
            row = await protocol_runs.acancel(row, user)
        except RunFinishedError as exc:
            raise TaskNotCancelableError(message=str(exc)) from None
        return task_of(row, context_id)

    @validate_request_params
    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks of this agent, newest first, optionally of one context or state."""
        validate_history_length(params)
        user, agent = _caller(context)
        size = min(params.page_size or PAGE_SIZE, MAX_PAGE_SIZE)
        try:
            start = int(params.page_token or 0)
        except ValueError:
            _invalid(f"Bad page token {params.page_token!r}.")
        rows = (swappable.result_model().objects.select_related("thread")
                .filter(thread__user=user, robot_name=agent, parent_id__isnull=True).order_by("-created_at", "-pk"))
        if params.context_id:
            rows = rows.filter(thread__session_id__in=protocol_runs.session_keys(params.context_id, user))
        if params.status:
            rows = rows.filter(status__in=[status for status, state in STATES.items() if state == params.status])
        total = await rows.acount()
        page = [row async for row in rows[start:start + size]]
        tasks = [apply_history_length(task_of(row, protocol_runs.public_session_id(row.thread)), params)
                 for row in page]
        following = str(start + size) if start + size < total else ""
        return ListTasksResponse(tasks=tasks, next_page_token=following, page_size=size, total_size=total)

    @validate_request_params
    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Event, None]:
        """Stream an unfinished task from its first event, as ``message/stream`` does."""
        row = await self._owned(params.id, context)
        if STATES.get(row.status) in TERMINAL:
            raise UnsupportedOperationError(message=f"Task {params.id} is finished; get it with GetTask.")
        async for event in self._follow(row, protocol_runs.public_session_id(row.thread), 0):
            yield event

    @validate_request_params
    async def on_create_task_push_notification_config(self, params: TaskPushNotificationConfig,
                                                      context: ServerCallContext) -> TaskPushNotificationConfig:
        """Register a webhook for the caller's task (``InvalidParamsError`` for a URL the settings do not allow)."""
        user, _ = _caller(context)
        row = await self._owned(params.task_id, context)
        try:
            return await sync_to_async(push.create_config)(row, user, params)
        except WebhookURLError as exc:
            _refused(exc)
        except ValueError as exc:
            _invalid(str(exc))

    @validate_request_params
    async def on_get_task_push_notification_config(self, params: GetTaskPushNotificationConfigRequest,
                                                   context: ServerCallContext) -> TaskPushNotificationConfig:
        """A webhook config of the caller's task, its token included; ``TaskNotFoundError`` for another's."""
        row = await self._owned(params.task_id, context)
        found = await sync_to_async(push.get_config)(row, params.id)
        if found is None:
            raise TaskNotFoundError(message=f"Task {params.task_id} has no push-notification config {params.id!r}.")
        return found

    @validate_request_params
    async def on_list_task_push_notification_configs(
            self, params: ListTaskPushNotificationConfigsRequest,
            context: ServerCallContext) -> ListTaskPushNotificationConfigsResponse:
        """Every webhook config of the caller's task (one page: a task holds at most ``push.MAX_CONFIGS``)."""
        row = await self._owned(params.task_id, context)
        return ListTaskPushNotificationConfigsResponse(configs=await sync_to_async(push.list_configs)(row))

    @validate_request_params
    async def on_delete_task_push_notification_config(self, params: DeleteTaskPushNotificationConfigRequest,
                                                      context: ServerCallContext) -> None:
        """Delete a webhook config of the caller's task; ``TaskNotFoundError`` for one that is not there."""
        row = await self._owned(params.task_id, context)
        if not await sync_to_async(push.delete_config)(row, params.id):
            raise TaskNotFoundError(message=f"Task {params.task_id} has no push-notification config {params.id!r}.")

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        """Not offered (the public card says all): :class:`UnsupportedOperationError`."""
        raise UnsupportedOperationError(message="This agent has no extended card; its public card says all.")
