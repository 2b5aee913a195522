"""The ACP endpoints: ping, agents, runs (sync, async, stream), resume, cancel, events, sessions.

Every endpoint but ``/ping`` needs ``Authorization: Bearer <token>`` (401 otherwise); a session cookie
does not authenticate, and CSRF does not apply. Another user's run or session is ``not_found``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import wraps
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from .. import protocol_runs
from ..api_tokens import authenticate
from ..records import AttachmentsTooLargeError
from ..registry import UnknownRobotError, registry
from ..run_control import RunControlError
from .wire import agent_manifest, error_response, input_content, input_text, parse_run_id, run_object, text_message

__all__ = ["agent", "agents", "ping", "run", "run_cancel", "run_events", "runs", "session"]

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def token_required(view: View) -> View:
    """Authenticate the request's bearer token (401 without a valid one); the user goes in ``request.user``."""

    @csrf_exempt
    @wraps(view)
    async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        user = await sync_to_async(authenticate)(request.headers.get("Authorization", ""))
        if user is None:
            response = error_response("unauthorized", "Send 'Authorization: Bearer <token>' with a valid API "
                                      "token (manage.py robotlab_token USERNAME).")
            response["WWW-Authenticate"] = "Bearer"
            return response
        request.user = user
        return await view(request, *args, **kwargs)

    return wrapper


def _too_large(error: Exception) -> str:
    if isinstance(error, AttachmentsTooLargeError):
        return str(error)
    return (f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
            "(settings.DATA_UPLOAD_MAX_MEMORY_SIZE); send smaller files, or raise it and "
            "ROBOTLAB['MAX_ATTACHMENT_BYTES'].")


def _body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError as exc:
        raise ValueError(f"The request body is not JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise ValueError("The request body must be a JSON object.")
    return body


async def _run_json(row: Any) -> dict[str, Any]:
    thread = await sync_to_async(lambda: row.thread)()
    return run_object(row, thread.session_id)


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


async def _respond(row: Any, mode: str) -> HttpResponseBase:
    """The reply to a created or resumed run in ``mode``: the run now (async), settled (sync), or SSE."""
    if mode == "stream":
        response = StreamingHttpResponse(_sse(row), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        return response
    if mode == "sync":
        row = await protocol_runs.await_settled(row)
    return JsonResponse(await _run_json(row), status=200 if mode == "sync" else 202)


async def _sse(row: Any) -> AsyncIterator[str]:
    """The run's ACP events.

    ``run.created``, ``run.in-progress``, a ``message.part`` per text delta, ``message.completed`` and the final
    ``run.*`` event.
    """

    def frame(event: dict[str, Any]) -> str:
        return f"data: {json.dumps(event)}\n\n"

    yield frame({"type": "run.created", "run": await _run_json(row)})
    yield frame({"type": "run.in-progress", "run": {**await _run_json(row), "status": "in-progress"}})
    async for event in protocol_runs.afollow_events(row):
        if event["kind"] == "text.delta" and event.get("text"):
            yield frame({"type": "message.part", "part": text_message(event["text"])["parts"][0]})
    row = await protocol_runs.await_settled(row)
    run = await _run_json(row)
    if run["output"]:
        yield frame({"type": "message.completed", "message": run["output"][0]})
    yield frame({"type": f"run.{run['status']}", "run": run})


@token_required
async def runs(request: HttpRequest) -> HttpResponseBase:
    """``POST /runs``: start a run of ``agent_name`` on ``input`` in ``mode`` sync, async or stream."""
    if request.method != "POST":
        return error_response("invalid_input", "Use POST /runs.")
    try:
        body = _body(request)
        mode = str(body.get("mode") or "sync")
        if mode not in ("sync", "async", "stream"):
            raise ValueError(f"Unknown mode {mode!r}; use sync, async or stream.")
        text, files = input_content(body.get("input"))
        session: dict[str, Any] = body["session"] if isinstance(body.get("session"), dict) else {}
        session_id = body.get("session_id") or session.get("id")
        row = await sync_to_async(protocol_runs.start_for_user)(
            request.user, str(body.get("agent_name") or ""), text, str(session_id) if session_id else None,
            attachments=files)
    except UnknownRobotError as exc:
        return error_response("not_found", str(exc))
    except protocol_runs.SessionTakenError:
        return error_response("not_found", "No session with that id.")
    except (AttachmentsTooLargeError, RequestDataTooBig) as exc:
        return error_response("invalid_input", _too_large(exc), status=413)
    except ValueError as exc:
        return error_response("invalid_input", str(exc))
    return await _respond(row, mode)


async def _owned_run(request: HttpRequest, run_id: str) -> Any:
    stored = parse_run_id(run_id)
    return await sync_to_async(protocol_runs.find_run)(stored, request.user) if stored else None


@token_required
async def run(request: HttpRequest, run_id: str) -> HttpResponseBase:
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
    except ValueError as exc:
        return error_response("invalid_input", str(exc))
    return await _respond(row, str(body.get("mode") or "sync"))


@token_required
async def run_cancel(request: HttpRequest, run_id: str) -> HttpResponse:
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
async def run_events(request: HttpRequest, run_id: str) -> HttpResponse:
    """``GET /runs/{id}/events``: the run's stored events so far, as ACP events."""
    row = await _owned_run(request, run_id)
    if row is None:
        return error_response("not_found", f"No run {run_id}.")
    model = type(row).events.rel.related_model
    stored = [event.to_dict() async for event in model.objects.filter(result_id=row.pk).order_by("pk")]
    events = [{"type": "message.part", "part": text_message(event["text"])["parts"][0]}
              for event in stored if event["kind"] == "text.delta" and event.get("text")]
    return JsonResponse({"events": events})


@token_required
async def session(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /session/{id}``: the session (thread) of the caller, with no history resources."""
    thread = await sync_to_async(protocol_runs.find_thread)(session_id, request.user)
    if thread is None:
        return error_response("not_found", f"No session {session_id}.")
    return JsonResponse({"session": {"id": thread.session_id, "history": [], "state": None}})
