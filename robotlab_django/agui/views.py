"""The AG-UI endpoints: ``POST <name>`` runs (or resumes, or reconnects to) a run as SSE; ``POST <name>/cancel``.

Every request authenticates, each time: ``Authorization: Bearer <token>`` (an API token, ``manage.py robotlab_token``)
or the session of a logged-in user (the chat page's) with its CSRF token (``X-CSRFToken``). Without either it is 401;
a session request without a valid CSRF token is 403. A ``threadId`` naming another user's thread is refused (403); an
unknown one starts a thread of the caller's. A body that is no ``RunAgentInput`` is 422 (400 when it is not JSON, 413
when too large), its message naming what was wrong; every refusal is ``{"code", "message"}``, before any event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from robotlab_django.accounting.rate_limits import RateLimitedError
from robotlab_django.agui.inputs import InputError, RunInput, parse_input
from robotlab_django.agui.positions import START, Position
from robotlab_django.agui.runs import (
    RefusedThreadError,
    answer_interrupt,
    cancel_runs,
    reconnect_row,
    start_run,
)
from robotlab_django.agui.stream import PositionError, frames, start_events
from robotlab_django.agui.wire import error_response, run_uuid
from robotlab_django.chat.revocation import session_user
from robotlab_django.protocols.requests import BodyTooLargeError, parse_json, read_body
from robotlab_django.protocols.tokens import authenticate
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.runs.control import RunControlError
from robotlab_django.runs.records import AttachmentsTooLargeError

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

__all__ = ["Caller", "agent", "cancel", "csrf_failure", "not_found"]

logger = logging.getLogger("robotlab_django")


@dataclass(frozen=True)
class Caller:
    """Who asks: the user, and how to check again that they still may (:meth:`allowed`)."""

    user: Any
    header: str = ""
    session: Any = None

    async def allowed(self) -> bool:
        """Whether the token is still valid (not revoked or expired), or the session still logs the user in."""
        user: _AnyUser | None
        if self.header:
            user = await sync_to_async(authenticate)(self.header)
        else:
            user = await sync_to_async(session_user)(self.session)
        return user is not None and user.is_authenticated and user.pk == self.user.pk


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request: HttpRequest, reason: str) -> HttpResponse:
        return HttpResponse(reason, status=403)


def _no_view(request: HttpRequest) -> HttpResponse:  # the view the CSRF check is asked about: not exempt
    return HttpResponse()


def csrf_failure(request: HttpRequest) -> str | None:
    """Why the session request ``request`` fails Django's CSRF check (``None`` when it passes)."""
    check = _CsrfCheck(_no_view)
    check.process_request(request)
    refused = check.process_view(request, _no_view, (), {})
    return None if refused is None else bytes(refused.content).decode()


async def _caller(request: HttpRequest) -> Caller | HttpResponse:
    header = request.headers.get("Authorization", "")
    if header:
        user = await sync_to_async(authenticate)(header)
        if user is None:
            refused = error_response("unauthorized", "The bearer token is not a valid API token (unknown, expired "
                                     "or revoked): manage.py robotlab_token USERNAME prints one.", 401)
            refused["WWW-Authenticate"] = "Bearer"
            return refused
        return Caller(user, header=header)
    auser = getattr(request, "auser", None)
    user = await auser() if auser is not None else None
    if not getattr(user, "is_authenticated", False):
        refused = error_response("unauthorized", "Log in (the chat page's session, with its CSRF token) or send "
                                 "'Authorization: Bearer <token>' (manage.py robotlab_token USERNAME).", 401)
        refused["WWW-Authenticate"] = "Bearer"
        return refused
    reason = csrf_failure(request)
    if reason is not None:
        return error_response("csrf_failed", f"CSRF verification failed ({reason}): a request with the session "
                              "sends the csrftoken cookie's value in the X-CSRFToken header.", 403)
    return Caller(user, session=request.session)


def _post_only(request: HttpRequest, what: str) -> HttpResponse | None:
    if request.method == "POST":
        return None
    refused = error_response("method_not_allowed", f"POST {what} here.", 405)
    refused["Allow"] = "POST"
    return refused


async def _body(request: HttpRequest) -> Any:
    return parse_json(read_body(request))


def _sse(stream: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(stream, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy sends each event as it comes
    return response


def _known(name: str) -> bool:
    return name in registry.names() or name in registry.network_names()


async def _open(request: HttpRequest, name: str, caller: Caller, run_input: RunInput) -> HttpResponseBase:
    """The stream the request asks for: a reconnect, a resume, or a new run."""
    user = caller.user
    last_event_id = request.headers.get("Last-Event-ID", "")
    after, position = 0, None
    if last_event_id:
        position = Position.parse(last_event_id)
        row = await sync_to_async(reconnect_row)(user, name, run_input.thread_id, position)
        after = position.after
    elif run_input.resume:
        row, after = await answer_interrupt(user, name, run_input)
    else:
        row = await sync_to_async(start_run)(user, name, run_input)
    start = [] if position is not None and position.group != START else await sync_to_async(start_events)(
        row, run_input, after, name)
    return _sse(frames(row, run_input, start, after=after, position=position, allowed=caller.allowed))


@csrf_exempt
async def agent(request: HttpRequest, name: str) -> HttpResponseBase:
    """``POST <name>``: a ``RunAgentInput``; the run's AG-UI events as Server-Sent Events.

    A new message starts a run of the robot or network ``name`` on the thread ``threadId``; ``resume`` answers the
    interrupt the thread's parked run ended with and streams the rest of that run; with ``Last-Event-ID`` the stream
    of the run it names goes on after that event (nothing is started or answered). Closing the stream does not stop
    the run: ``POST <name>/cancel`` does.
    """
    refused = _post_only(request, "a RunAgentInput (JSON)")
    if refused is not None:
        return refused
    caller = await _caller(request)
    if not isinstance(caller, Caller):
        return caller
    if not await sync_to_async(_known)(name):
        return error_response("not_found", f"No robot or network {name!r}.", 404)
    try:
        return await _open(request, name, caller, parse_input(await _body(request)))
    except BodyTooLargeError as exc:
        return error_response("invalid_input", str(exc), 413)
    except AttachmentsTooLargeError as exc:
        return error_response("invalid_input", str(exc), 413)
    except RateLimitedError as exc:
        limited = error_response("rate_limited", str(exc), 429)
        limited["Retry-After"] = str(exc.retry_after)
        return limited
    except RefusedThreadError as exc:
        return error_response("forbidden", str(exc), 403)
    except UnknownRobotError as exc:
        return error_response("not_found", str(exc), 404)
    except LookupError as exc:  # no such run or interrupt of the caller's
        return error_response("not_found", str(exc.args[0] if exc.args else exc), 404)
    except RunControlError as exc:
        return error_response("conflict", str(exc), 409)
    except (InputError, PositionError) as exc:
        return error_response("invalid_input", str(exc), 422)
    except ValueError as exc:  # not JSON, a bad Last-Event-ID, a message the run refuses (too long, a bad file)
        return error_response("invalid_input", str(exc), 400 if "not JSON" in str(exc) else 422)


@csrf_exempt
async def cancel(request: HttpRequest, name: str) -> HttpResponseBase:
    """``POST <name>/cancel`` with ``{"threadId", "runId"?}``: cancel the thread's unfinished runs of ``name``.

    ``runId`` (the stored run id, ``RUN_STARTED.metadata.robotlab.runId``) cancels that run only. A run ends as the
    chat page's cancel ends it: its stream ends with ``RUN_FINISHED`` (outcome ``cancelled``), keeping the text it
    streamed. Answers 202 with the runs cancelled, ``{"threadId", "cancelled": [runId, ...]}``.
    """
    refused = _post_only(request, '{"threadId", "runId"?} to cancel')
    if refused is not None:
        return refused
    caller = await _caller(request)
    if not isinstance(caller, Caller):
        return caller
    try:
        body = await _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("threadId"), str):
            raise InputError('The body is {"threadId": "...", "runId": "..."} (runId optional).')
        if body.get("runId") is not None and not isinstance(body.get("runId"), str):
            raise InputError("'runId' must be the stored run id (RUN_STARTED.metadata.robotlab.runId), a string.")
        rows = await sync_to_async(cancel_runs)(caller.user, name, body["threadId"], body.get("runId"))
    except BodyTooLargeError as exc:
        return error_response("invalid_input", str(exc), 413)
    except LookupError as exc:
        return error_response("not_found", str(exc.args[0] if exc.args else exc), 404)
    except RunControlError as exc:
        return error_response("conflict", str(exc), 409)
    except ValueError as exc:
        return error_response("invalid_input", str(exc), 422)
    return JsonResponse({"threadId": body["threadId"], "cancelled": [run_uuid(row) for row in rows]}, status=202)


@csrf_exempt
async def not_found(request: HttpRequest, path: str = "") -> HttpResponseBase:
    """Any other path under the AG-UI URLconf: 404 saying where the agents are."""
    return error_response("not_found", "No AG-UI endpoint here: POST a RunAgentInput to <name> (a registered robot "
                          "or network), or {\"threadId\"} to <name>/cancel.", 404)

