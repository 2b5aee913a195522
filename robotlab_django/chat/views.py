"""The chat pages: a user's threads, a new thread, the chat with its history, posting a message.

Include them with ``path("robotlab/", include("robotlab_django.urls"))``. Every page needs a
logged-in user unless ``settings.ROBOTLAB_CHAT_LOGIN_REQUIRED`` is ``False``; then an anonymous
visitor owns the threads it created in its session. A thread of someone else is a 404.

A new thread runs a registered robot or network (picked when it is created). Posting a message
(CSRF protected) queues a run under the robot's on-busy policy (:func:`robotlab_django.runs.busy.start_run`)
and hands it to the executor (:func:`robotlab_django.runs.busy.dispatch`), then answers at once:
JSON for ``fetch`` (``Accept: application/json``; with ``on_busy``, ``behind`` and ``notice`` when a reply was
running), else a redirect to the chat; past the user's rate limit (:mod:`~.rate_limits`) it answers 429 with
``Retry-After`` and queues nothing, and while a reply runs on a robot whose policy is ``"reject"``, 409. The page
follows the run over the websocket (``ws/robotlab/threads/<pk>/``) or, without one, by polling
:func:`results_json`. Model text is only ever rendered escaped, and every response carries the pages'
Content-Security-Policy (:mod:`robotlab_django.chat.csp`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from django.contrib.auth.views import redirect_to_login
from django.db.models import Max, Min
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.accounting.rate_limits import RateLimitedError
from robotlab_django.chat.access import SESSION_KEY, default_robot, login_required
from robotlab_django.chat.csp import content_security_policy
from robotlab_django.conf import app_settings
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.runs import busy, control, thread_queue
from robotlab_django.runs.steering import STEERED
from robotlab_django.runs.user_errors import public_error, public_events
from robotlab_django.runs.watch import stopping
from robotlab_django.workers.presence import waiting_hint

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from robotlab_django.models import RobotResult, Thread

__all__ = ["POLL_EVENTS", "STEERED_NOTE", "SESSION_KEY", "chat", "default_robot", "history_items", "login_required",
           "post_approval", "post_message", "result_summary", "results_json", "thread_list", "uses_demo_model"]

#: What the page shows under a message steered into the reply before it.
STEERED_NOTE = "added to the reply above"


def uses_demo_model() -> bool:
    """Whether app-built robots use the offline demo model (the page says so)."""
    return app_settings.uses_demo_llm()


def _is_authenticated(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_authenticated", False))


def _denied(request: HttpRequest) -> HttpResponseBase | None:
    """A login redirect (or 403 JSON) when the page needs a user and there is none."""
    if _is_authenticated(request) or not login_required():
        return None
    if _wants_json(request):
        return JsonResponse({"error": "login required"}, status=403)
    return redirect_to_login(request.get_full_path())


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _threads(request: HttpRequest) -> QuerySet[Thread]:
    """The threads the visitor may see."""
    model = swappable.thread_model()
    if _is_authenticated(request):
        return model.objects.for_user(request.user)
    return model.objects.filter(pk__in=request.session.get(SESSION_KEY, []), user__isnull=True)


def _thread(request: HttpRequest, pk: int) -> Thread:
    """The visitor's thread ``pk``; 404 when it is missing or someone else's."""
    found = _threads(request).filter(pk=pk).first()
    if found is None:
        raise Http404("No such thread.")
    return found


def _tool_names(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    return [str((call.get("function") or {}).get("name") or call.get("name") or "tool") for call in calls]


def _text(content: object) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def history_items(results: Iterable[RobotResult]) -> list[dict[str, Any]]:
    """What the chat page shows for ``results`` (rows in order): one item per user turn and per reply.

    Each item is ``{"role": "user" | "assistant", "text", "tools": [names], "steps": [robot names],
    "status", "error", "run_id"}``; completed runs are read from their stored messages, the others show
    their input and status. The rows of a network's robots (``delegated_by`` set) are no turns of their
    own: they are the ``steps`` of their network's reply. A message steered into a running reply
    (:mod:`robotlab_django.runs.steering`) shows once, as its own row says it: "added to the reply above".
    """
    rows = list(results)
    steered = {row.input for row in rows if row.stop_reason == STEERED}
    steps: dict[str, list[str]] = {}
    for row in rows:
        if row.delegated_by:
            steps.setdefault(row.run_id.rpartition(".")[0], []).append(row.robot_name)
    items: list[dict[str, Any]] = []
    for row in rows:
        if row.delegated_by:
            continue
        base = {"run_id": row.run_id, "sequence_number": row.sequence_number, "steps": []}
        ran = steps.get(row.run_id, [])
        if row.stop_reason == STEERED:
            items += [{**base, "role": "user", "text": row.input, "tools": [], "status": "", "error": ""},
                      {**base, "role": "assistant", "text": "", "tools": [], "status": STEERED_NOTE, "error": ""}]
            continue
        if row.status != Status.COMPLETED or not row.messages:
            if row.input:
                items.append({**base, "role": "user", "text": row.input, "tools": [], "status": "",
                              "error": ""})
            items.append({**base, "role": "assistant", "text": row.reply, "tools": [], "steps": ran,
                          "status": row.status, "error": public_error(row.error_type, row.error, row.error_kind)[1]})
            continue
        reply: dict[str, Any] | None = None
        asked = False
        for message in row.messages:
            role = message.get("role")
            if role == "user":
                if asked and _text(message.get("content")) in steered:
                    continue  # said while this reply ran: its own row shows it, after the reply
                asked = True
                items.append({**base, "role": "user", "text": _text(message.get("content")), "tools": [],
                              "status": "", "error": ""})
                reply = None
            elif role == "assistant":
                if reply is None:
                    reply = {**base, "role": "assistant", "text": "", "tools": [], "steps": ran,
                             "status": row.status, "error": ""}
                    items.append(reply)
                reply["tools"].extend(_tool_names(message))
                text = _text(message.get("content"))
                if text:
                    reply["text"] = f"{reply['text']}\n\n{text}" if reply["text"] else text
    return items


def result_summary(row: RobotResult) -> dict[str, Any]:
    """The JSON the page polls for one run: ids, status, input, reply, error, tool names, a hint, the stop reason.

    ``hint`` says that no worker has picked a queued run up (:func:`~robotlab_django.workers.presence.waiting_hint`),
    unless it waits behind the thread's running reply (:mod:`robotlab_django.runs.thread_queue`): then it says so.
    ``stopping`` says that a cancelled run's runner has not stopped yet (:func:`~robotlab_django.runs.watch.stopping`):
    its reply may still grow, and its ``run.cancelled`` brings the one it keeps.
    A model provider's error is the short message of :func:`~robotlab_django.runs.user_errors.public_error`.
    """
    tools = [name for message in row.messages or [] if message.get("role") == "assistant"
             for name in _tool_names(message)]
    error_type, error = public_error(row.error_type, row.error, row.error_kind)
    hint = waiting_hint(row)
    if hint and thread_queue.held(row.pk):  # no worker is missing: it waits behind the thread's running reply
        hint = busy.NOTICES["enqueue"]
    return {
        "id": row.pk, "sequence_number": row.sequence_number, "run_id": row.run_id, "robot": row.robot_name,
        "status": row.status, "input": row.input, "reply": row.reply, "error": error,
        "error_type": error_type, "tools": tools, "is_finished": row.is_finished,
        "question": row.question or None, "hint": hint, "stopping": stopping(row), "stop_reason": row.stop_reason,
    }


@content_security_policy
@require_http_methods(["GET", "POST"])
def thread_list(request: HttpRequest) -> HttpResponseBase:
    """GET: the visitor's threads. POST (CSRF protected): create a thread and open its chat."""
    denied = _denied(request)
    if denied is not None:
        return denied
    robots = registry.names()
    if request.method == "POST":
        robot = request.POST.get("robot") or default_robot()
        if robot not in robots and robot not in registry.network_names():
            context = _list_context(request, robots, "Unknown robot or network.")
            return render(request, "robotlab/thread_list.html", context, status=400)
        owner = cast(Any, request.user) if _is_authenticated(request) else None
        thread = swappable.thread_model().objects.create(user=owner, robot_name=robot)
        if owner is None:
            request.session[SESSION_KEY] = [*request.session.get(SESSION_KEY, []), thread.pk]
        return redirect("robotlab:chat", pk=thread.pk)
    return render(request, "robotlab/thread_list.html", _list_context(request, robots, ""))


def _list_context(request: HttpRequest, robots: list[str], error: str) -> dict[str, Any]:
    return {"threads": _threads(request).order_by("-updated_at")[:200], "robots": robots,
            "networks": registry.network_names(), "default_robot": default_robot(), "error": error,
            "demo_model": uses_demo_model()}


def _runnable(name: str) -> dict[str, Any]:
    """What the chat header says about a thread's robot or network: its kind and description."""
    try:
        entry = registry.lookup(name)
    except (UnknownRobotError, ImportError):
        return {"kind": "", "description": ""}
    return {"kind": entry.kind, "description": entry.description or ""}


@content_security_policy
@require_GET
def chat(request: HttpRequest, pk: int) -> HttpResponseBase:
    """The chat page of thread ``pk``: its history, the message form, and what the script needs."""
    denied = _denied(request)
    if denied is not None:
        return denied
    thread = _thread(request, pk)
    rows = swappable.result_model().objects.filter(thread_id=thread.pk)
    results = list(rows.order_by("sequence_number"))
    pending = [{"run_id": row.run_id, "sequence_number": row.sequence_number, "id": row.pk,
                "question": row.question or None} for row in results if not row.is_finished]
    events = swappable.event_model().objects.filter(thread_id=thread.pk)
    if pending:  # replay the unfinished runs from their first stored event
        run_ids = [item["run_id"] for item in pending]
        first = events.filter(run_id__in=run_ids).aggregate(first=Min("pk"))["first"]
        events = events.filter(pk__lt=first) if first is not None else events
    cursor = events.aggregate(last=Max("pk"))["last"] or 0
    return render(request, "robotlab/chat.html", {
        "thread": thread, "items": history_items(results), "demo_model": uses_demo_model(),
        "runnable": _runnable(thread.robot_name or default_robot() or ""),
        "last_sequence": results[-1].sequence_number if results else 0, "pending": pending, "cursor": cursor,
        "ws_path": f"/ws/robotlab/threads/{thread.pk}/",
        "post_url": reverse("robotlab:post_message", kwargs={"pk": thread.pk}),
        "results_url": reverse("robotlab:results_json", kwargs={"pk": thread.pk}),
        "max_length": app_settings.MAX_MESSAGE_LENGTH,
    })


@content_security_policy
@require_POST
def post_message(request: HttpRequest, pk: int) -> HttpResponseBase:
    """Queue a run of the thread's robot on the posted ``message`` and return at once."""
    denied = _denied(request)
    if denied is not None:
        return denied
    thread = _thread(request, pk)
    text = (request.POST.get("message") or "").strip()
    error, status = "", 400
    started = None
    if not text:
        error = "Type a message first."
    else:
        try:
            started = busy.start_run(thread, thread.robot_name or default_robot(), text, user=request.user,
                                     limit_rate=True)
        except RateLimitedError as exc:
            return _too_many(request, exc)
        except busy.ReplyRunningError as exc:  # the robot's on_busy is "reject"
            error, status = str(exc), 409
        except (ValueError, UnknownRobotError) as exc:
            error = str(exc)
    row = started.row if started is not None else None
    if started is not None:
        busy.dispatch(started)
    if _wants_json(request):
        if started is None:
            return JsonResponse({"error": error}, status=status)
        started.row.refresh_from_db()
        return JsonResponse({"result": result_summary(started.row), **started.fields()}, status=202)
    if row is None:
        return HttpResponse(error, status=status, content_type="text/plain; charset=utf-8")
    return redirect("robotlab:chat", pk=thread.pk)


def _too_many(request: HttpRequest, error: RateLimitedError) -> HttpResponse:
    """429 with ``Retry-After``: the user queued too many runs lately (JSON for ``fetch``, else text)."""
    response: HttpResponse
    if _wants_json(request):
        response = JsonResponse({"error": str(error), "retry_after": error.retry_after}, status=429)
    else:
        response = HttpResponse(str(error), status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(error.retry_after)
    return response


def _control(request: HttpRequest, pk: int, result_pk: int,
             act: Callable[[RobotResult], RobotResult]) -> HttpResponseBase:
    """Apply ``act`` to the run ``result_pk`` of the visitor's thread ``pk``.

    202 with the run, 404 when it is not theirs, 409 with the reason when it does not apply.
    """
    denied = _denied(request)
    if denied is not None:
        return denied
    thread = _thread(request, pk)
    row = thread.results.filter(pk=result_pk).first()
    if row is None:
        raise Http404("No such run.")
    try:
        row = act(row)
    except control.RunControlError as exc:
        if _wants_json(request):
            return JsonResponse({"error": str(exc)}, status=409)
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
    if _wants_json(request):
        return JsonResponse({"result": result_summary(row)}, status=202)
    return redirect("robotlab:chat", pk=thread.pk)


@content_security_policy
@require_POST
def post_answer(request: HttpRequest, pk: int, result_pk: int) -> HttpResponseBase:
    """Answer the question run ``result_pk`` waits on (form field ``answer``) and resume it."""
    text = request.POST.get("answer")
    if text is None:
        return HttpResponse('Send the answer in the "answer" field.', status=400,
                            content_type="text/plain; charset=utf-8")
    return _control(request, pk, result_pk,
                    lambda row: control.answer(row, text, request.user, check_owner=False))


@content_security_policy
@require_POST
def post_approval(request: HttpRequest, pk: int, result_pk: int) -> HttpResponseBase:
    """Approve or deny the tool call run ``result_pk`` waits on and resume it.

    Form fields: ``decision`` (``approve`` or ``deny``) and ``request_id`` (the call the page showed: a call decided
    meanwhile is refused with 409, not taken for another).
    """
    decision = request.POST.get("decision")
    if decision not in ("approve", "deny"):
        return HttpResponse('Send "decision": "approve" or "deny".', status=400,
                            content_type="text/plain; charset=utf-8")
    request_id = request.POST.get("request_id") or None
    return _control(request, pk, result_pk,
                    lambda row: control.decide(row, decision == "approve", request.user, request_id=request_id,
                                               check_owner=False))


@content_security_policy
@require_POST
def post_cancel(request: HttpRequest, pk: int, result_pk: int) -> HttpResponseBase:
    """Cancel run ``result_pk`` (queued, running or awaiting)."""
    return _control(request, pk, result_pk, lambda row: control.cancel(row, request.user, check_owner=False))


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


#: The most stored events one poll returns.
POLL_EVENTS = 1000


@content_security_policy
@require_GET
def results_json(request: HttpRequest, pk: int) -> HttpResponseBase:
    """For polling.

    The thread's runs with ``sequence_number >= since`` (``?since=``, default 1), and with ``?after=<cursor>`` the
    stored stream events after that cursor (each event's ``to_dict()`` plus ``cursor``, its ``RunEvent`` primary
    key, as the websocket sends them).
    """
    denied = _denied(request)
    if denied is not None:
        return denied
    thread = _thread(request, pk)
    since = _int(request.GET.get("since"), 1)
    rows = (swappable.result_model().objects.filter(thread_id=thread.pk, sequence_number__gte=since,
                                                       delegated_by="")
            .order_by("sequence_number")[:100])
    data: dict[str, Any] = {"thread": thread.pk, "results": [result_summary(row) for row in rows]}
    if "after" in request.GET:
        events = (swappable.event_model().objects.filter(thread_id=thread.pk,
                                                            pk__gt=_int(request.GET["after"], 0))
                  .order_by("pk")[:POLL_EVENTS])
        data["events"] = public_events({**event.to_dict(), "cursor": event.pk} for event in events)
    return JsonResponse(data)
