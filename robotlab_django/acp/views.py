"""The ACP endpoints: ping, agents, runs (sync, async, stream), resume, cancel, events, sessions and their history.

Every endpoint but ``/ping`` needs ``Authorization: Bearer <token>`` (401 otherwise); a session cookie
does not authenticate, and CSRF does not apply. Another user's run or session is ``not_found``. A run past the
user's rate limit (:mod:`robotlab_django.accounting.rate_limits`) is refused with 429 and ``Retry-After``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, cast

from asgiref.sync import sync_to_async
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from robotlab_django.accounting.rate_limits import RateLimitedError
from robotlab_django.acp.events import ACP_EVENTS
from robotlab_django.acp.sessions import history_message, session_object
from robotlab_django.acp.wire import (
    agent_manifest,
    error_response,
    input_content,
    input_text,
    parse_run_id,
    parse_session_id,
    run_object,
    text_message,
)
from robotlab_django.protocols import runs as protocol_runs
from robotlab_django.protocols.requests import BodyTooLargeError, parse_json, read_body
from robotlab_django.protocols.tokens import TokenRequest, authenticate
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.runs.busy import ReplyRunningError
from robotlab_django.runs.control import RunControlError
from robotlab_django.runs.records import AttachmentsTooLargeError
from robotlab_django.streaming.streamed_text import Chunk, StreamedText

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult, RunEvent

__all__ = ["agent", "agents", "not_found", "ping", "protocol_errors", "resource", "run", "run_cancel", "run_events",
           "runs", "session", "session_wrapped", "token_required"]

logger = logging.getLogger("robotlab_django")

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def protocol_errors(view: View) -> View:
    """Answer whatever ``view`` raises in the protocol's form: a server error is ``server_error`` (500), logged.

    A body over :func:`~robotlab_django.protocols.requests.body_limit` is ``invalid_input`` with HTTP 413.
    """

    @wraps(view)
    async def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        try:
            return await view(request, *args, **kwargs)
        except BodyTooLargeError as exc:
            return error_response("invalid_input", str(exc), status=413)
        except Exception:
            logger.exception("robotlab: ACP %s %s failed", request.method, request.path)
            return error_response("server_error", "The server could not answer this request; it is logged.")

    return wrapper


def token_required(view: View) -> View:
    """Authenticate the request's bearer token (401 without a valid one); the user goes in ``request.user``.

    Errors are the protocol's (:func:`protocol_errors`).
    """

    @csrf_exempt
    @protocol_errors
    @wraps(view)
    async def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        user = await sync_to_async(authenticate)(request.headers.get("Authorization", ""))
        if user is None:
            response = error_response("unauthorized", "Send 'Authorization: Bearer <token>' with a valid API "
                                      "token (manage.py robotlab_token USERNAME).")
            response["WWW-Authenticate"] = "Bearer"
            return response
        request.user = user
        return await view(request, *args, **kwargs)

    return wrapper


def _body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object (read up to the protocol body limit).

    Raises:
        BodyTooLargeError: the body is over the limit.
        ValueError: it is not a JSON object.
    """
    body = parse_json(read_body(request))
    if not isinstance(body, dict):
        raise ValueError("The request body must be a JSON object.")
    return body


def _session_id(body: dict[str, Any]) -> str | None:
    """The session a run names, by ``session_id`` or ``session.id`` (a UUID); ``None`` for a new session."""
    session = body.get("session")
    if session is not None and not isinstance(session, dict):
        raise ValueError('"session" must be a session object {"id", "history", "state"}, or null.')
    named = {parse_session_id(value) for value in (body.get("session_id"), (session or {}).get("id"))
             if value is not None}
    if len(named) > 1:
        raise ValueError('"session_id" and "session.id" name different sessions.')
    return named.pop() if named else None


async def _run_json(row: RobotResult) -> dict[str, Any]:
    thread = await sync_to_async(lambda: row.thread)()
    return run_object(row, protocol_runs.public_session_id(thread))


@csrf_exempt
async def ping(request: HttpRequest) -> HttpResponse:
    """``GET /ping``: ``{}``."""
    return JsonResponse({})


@token_required
async def agents(request: HttpRequest) -> HttpResponse:
    """``GET /agents``: every registered robot and network."""
    names = await sync_to_async(lambda: [*registry.names(), *registry.network_names()])()
    return JsonResponse({"agents": [agent_manifest(name) for name in names]})


@token_required
async def agent(request: HttpRequest, name: str) -> HttpResponse:
    """``GET /agents/{name}``: one agent's manifest."""
    try:
        return JsonResponse(agent_manifest(name))
    except UnknownRobotError as exc:
        return error_response("not_found", str(exc))


async def _respond(row: RobotResult, mode: str) -> HttpResponseBase:
    """The reply to a created or resumed run in ``mode``: the run now (async), settled (sync), or SSE."""
    if mode == "stream":
        response = StreamingHttpResponse(_sse(row), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        return response
    if mode == "sync":
        row = await protocol_runs.await_settled(row)
    return JsonResponse(await _run_json(row), status=200 if mode == "sync" else 202)


async def _sse(row: RobotResult) -> AsyncIterator[str]:
    """The run's ACP events.

    ``run.created``, ``run.in-progress``, ``message.created``, a ``message.part`` per text delta (a network's
    tasks' too, as they stream), ``message.completed`` and the final ``run.*`` event. A run executed again (its
    worker was lost) does not send its text again (:class:`~.streamed_text.StreamedText`); a part
    of it that the new attempt says otherwise cannot be taken back: a new ``message.created`` starts the
    message again, with the text as it now is.
    """

    def frame(event: dict[str, Any]) -> str:
        return f"data: {json.dumps(event)}\n\n"

    def parts(chunks: list[Chunk]) -> Iterator[str]:
        for chunk in chunks:
            if chunk.replace:
                yield frame({"type": "message.created", "message": {"role": "agent", "parts": []}})
                if not chunk.text:
                    continue
            yield frame({"type": "message.part", "part": text_message(chunk.text)["parts"][0]})

    yield frame({"type": "run.created", "run": await _run_json(row)})
    yield frame({"type": "run.in-progress", "run": {**await _run_json(row), "status": "in-progress"}})
    yield frame({"type": "message.created", "message": {"role": "agent", "parts": []}})
    text = StreamedText(row.pk, ACP_EVENTS)
    async for event in protocol_runs.afollow_events(row):
        for line in parts(text.feed(event)):
            yield line
    for line in parts(text.close()):
        yield line
    row = await protocol_runs.await_settled(row)
    run = await _run_json(row)
    if run["output"]:
        yield frame({"type": "message.completed", "message": run["output"][0]})
    yield frame({"type": f"run.{run['status']}", "run": run})


@token_required
async def runs(request: TokenRequest) -> HttpResponseBase:
    """``POST /runs``: start a run of ``agent_name`` on ``input`` in ``mode`` sync, async or stream."""
    if request.method != "POST":
        return error_response("invalid_input", "Use POST /runs.")
    try:
        body = _body(request)
        mode = str(body.get("mode") or "sync")
        if mode not in ("sync", "async", "stream"):
            raise ValueError(f"Unknown mode {mode!r}; use sync, async or stream.")
        text, files = input_content(body.get("input"))
        row = await sync_to_async(protocol_runs.start_for_user)(
            request.user, str(body.get("agent_name") or ""), text, _session_id(body), attachments=files)
    except UnknownRobotError as exc:
        return error_response("not_found", str(exc))
    except protocol_runs.SessionTakenError:
        return error_response("not_found", "No session with that id.")
    except (AttachmentsTooLargeError, BodyTooLargeError) as exc:
        return error_response("invalid_input", str(exc), status=413)
    except RateLimitedError as exc:
        response = error_response("invalid_input", str(exc), status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    except ReplyRunningError as exc:  # the agent's on_busy is "reject" and a reply of the session runs
        return error_response("invalid_input", str(exc), status=409)
    except ValueError as exc:
        return error_response("invalid_input", str(exc))
    return await _respond(row, mode)


async def _owned_run(request: TokenRequest, run_id: str) -> RobotResult | None:
    stored = parse_run_id(run_id)
    return await sync_to_async(protocol_runs.find_run)(stored, request.user) if stored else None


@token_required
async def run(request: TokenRequest, run_id: str) -> HttpResponseBase:
    """``GET /runs/{id}``: the run; ``POST /runs/{id}``: resume an awaiting run with ``await_resume``."""
    row = await _owned_run(request, run_id)
    if row is None:
        return error_response("not_found", f"No run {run_id}.")
    if request.method != "POST":
        return JsonResponse(await _run_json(row))
    try:
        body = _body(request)
        resume = body.get("await_resume")
        message = resume.get("message") if isinstance(resume, dict) else None
        text = input_text([message])
        row = await protocol_runs.aanswer(row, text, request.user)
    except RunControlError as exc:
        return error_response("invalid_input", str(exc))
    except BodyTooLargeError as exc:
        return error_response("invalid_input", str(exc), status=413)
    except ValueError as exc:
        return error_response("invalid_input", str(exc))
    return await _respond(row, str(body.get("mode") or "sync"))


@token_required
async def run_cancel(request: TokenRequest, run_id: str) -> HttpResponse:
    """``POST /runs/{id}/cancel``: cancel a queued, running or awaiting run."""
    row = await _owned_run(request, run_id)
    if row is None:
        return error_response("not_found", f"No run {run_id}.")
    try:
        row = await protocol_runs.acancel(row, request.user)
    except RunControlError as exc:
        return error_response("invalid_input", str(exc))
    body = await _run_json(row)
    if body["status"] not in ("cancelled", "completed", "failed"):
        body["status"] = "cancelling"
    return JsonResponse(body, status=202)


@token_required
async def run_events(request: TokenRequest, run_id: str) -> HttpResponse:
    """``GET /runs/{id}/events``: the run's stored text so far, as ACP events.

    The ``message.part`` events the stream sent (a network's tasks' too; a lost worker's attempt not twice), with a
    ``message.created`` where it starts the message again (see :func:`_sse`).
    """
    row = await _owned_run(request, run_id)
    if row is None:
        return error_response("not_found", f"No run {run_id}.")
    model = cast("type[RunEvent]", type(row).events.rel.related_model)  # the event model, as swappable types it
    text = StreamedText(row.pk, ACP_EVENTS)
    chunks = [chunk async for event in model.objects.filter(Q(result_id=row.pk) | Q(result__parent_id=row.pk))
              .order_by("pk") for chunk in text.feed({**event.to_dict(), "result_id": event.result_id})]
    if row.status in protocol_runs.SETTLED:
        chunks.extend(text.close())
    events: list[dict[str, Any]] = []
    for chunk in chunks:
        if chunk.replace:
            events.append({"type": "message.created", "message": {"role": "agent", "parts": []}})
        if chunk.text:
            events.append({"type": "message.part", "part": text_message(chunk.text)["parts"][0]})
    return JsonResponse({"events": events})


async def _session(request: TokenRequest, session_id: str) -> dict[str, Any] | None:
    try:
        session_id = parse_session_id(session_id)
    except ValueError:
        return None
    thread = await sync_to_async(protocol_runs.find_thread)(session_id, request.user)
    if thread is None:
        return None
    return await sync_to_async(session_object)(request, thread, protocol_runs.public_session_id(thread))


@token_required
async def session(request: TokenRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/{id}``: the caller's session (thread), ``{"id", "history", "state"}``, as the client reads it.

    ``history`` holds a signed URL per message of the thread (:mod:`robotlab_django.acp.sessions`).
    """
    found = await _session(request, session_id)
    if found is None:
        return error_response("not_found", f"No session {session_id}.")
    return JsonResponse(found)


@token_required
async def session_wrapped(request: TokenRequest, session_id: str) -> HttpResponse:
    """``GET /session/{id}`` (the earlier path): the session wrapped, ``{"session": {...}}``."""
    found = await _session(request, session_id)
    if found is None:
        return error_response("not_found", f"No session {session_id}.")
    return JsonResponse({"session": found})


@csrf_exempt
@protocol_errors
async def resource(request: TokenRequest, token: str) -> HttpResponse:
    """``GET /resources/{token}``: the message a session's history URL names (its signature is the credential)."""
    message = await sync_to_async(history_message)(token)
    if message is None:
        return error_response("not_found", "No such resource, or its URL expired: read the session again.")
    return JsonResponse(message)


@csrf_exempt
@protocol_errors
async def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    """Any other path under the ACP URLconf: ``not_found``, in the protocol's form."""
    return error_response("not_found", "No ACP endpoint here: the endpoints are /ping, /agents, /runs and "
                          "/sessions (see GET /agents).")
