"""The chat pages: a user's threads, a new thread, the chat with its history, posting a message.

Include them with ``path("robotlab/", include("robotlab_django.urls"))``. Every page needs a
logged-in user unless ``settings.ROBOTLAB_CHAT_LOGIN_REQUIRED`` is ``False``; then an anonymous
visitor owns the threads it created in its session. A thread of someone else is a 404.

A new thread runs a registered robot or network (picked when it is created). Posting a message
(CSRF protected) queues a run with :func:`robotlab_django.services.start_run`
and hands it to the executor (:func:`robotlab_django.executor.dispatch`), then answers at once:
JSON for ``fetch`` (``Accept: application/json``), else a redirect to the chat. The page follows
the run over the websocket (``ws/robotlab/threads/<pk>/``) or, without one, by polling
:func:`results_json`. Model text is only ever rendered escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.contrib.auth.views import redirect_to_login
from django.db.models import Max, Min
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from . import executor, run_control, services, swappable
from .abstract_models import Status
from .access import SESSION_KEY, default_robot, login_required
from .conf import app_settings
from .registry import UnknownRobotError, registry
from .user_errors import public_error, public_events

__all__ = [
    "POLL_EVENTS",
    "SESSION_KEY",
    "chat",
    "default_robot",
    "history_items",
    "login_required",
    "post_message",
    "result_summary",
    "results_json",
    "thread_list",
    "uses_demo_model",
]

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


def _threads(request: HttpRequest) -> Any:
    """The threads the visitor may see."""
    model = swappable.thread_model()
    if _is_authenticated(request):
        return model.objects.for_user(request.user)
    return model.objects.filter(pk__in=request.session.get(SESSION_KEY, []), user__isnull=True)


def _thread(request: HttpRequest, pk: int) -> Any:
    """The visitor's thread ``pk``; 404 when it is missing or someone else's."""
    found = _threads(request).filter(pk=pk).first()
    if found is None:
        raise Http404("No such thread.")
    return found


def _tool_names(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    return [str((call.get("function") or {}).get("name") or call.get("name") or "tool") for call in calls]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def history_items(results: Any) -> list[dict[str, Any]]:
    """What the chat page shows for ``results`` (rows in order): one item per user turn and per reply.

    Each item is ``{"role": "user" | "assistant", "text", "tools": [names], "steps": [robot names],
    "status", "error", "run_id"}``; completed runs are read from their stored messages, the others show
    their input and status. The rows of a network's robots (``delegated_by`` set) are no turns of their
    own: they are the ``steps`` of their network's reply.
    """
    rows = list(results)
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
        if row.status != Status.COMPLETED or not row.messages:
            if row.input:
                items.append({**base, "role": "user", "text": row.input, "tools": [], "status": "",
                              "error": ""})
            items.append({**base, "role": "assistant", "text": row.reply, "tools": [], "steps": ran,
                          "status": row.status, "error": public_error(row.error_type, row.error)[1]})
            continue
        reply: dict[str, Any] | None = None
        for message in row.messages:
            role = message.get("role")
            if role == "user":
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


def result_summary(row: Any) -> dict[str, Any]:
    """The JSON the page polls for one run: ids, status, input, reply, error, tool names.

    A model provider's error is the short message of :func:`~robotlab_django.user_errors.public_error`.
    """
    tools = [name for message in row.messages or [] if message.get("role") == "assistant"
             for name in _tool_names(message)]
    error_type, error = public_error(row.error_type, row.error)
    return {
        "id": row.pk, "sequence_number": row.sequence_number, "run_id": row.run_id, "robot": row.robot_name,
        "status": row.status, "input": row.input, "reply": row.reply, "error": error,
        "error_type": error_type, "tools": tools, "is_finished": row.is_finished,
        "question": row.question or None,
    }


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


@require_POST
def post_message(request: HttpRequest, pk: int) -> HttpResponseBase:
    """Queue a run of the thread's robot on the posted ``message`` and return at once."""
    denied = _denied(request)
    if denied is not None:
        return denied
    thread = _thread(request, pk)
    text = (request.POST.get("message") or "").strip()
    error = ""
    row = None
    if not text:
        error = "Type a message first."
    else:
        try:
            row = services.start_run(thread, thread.robot_name or default_robot(), text, user=request.user)
        except (ValueError, UnknownRobotError) as exc:
            error = str(exc)
    if row is not None:
        executor.dispatch(row)
    if _wants_json(request):
        if row is None:
            return JsonResponse({"error": error}, status=400)
        row.refresh_from_db()
        return JsonResponse({"result": result_summary(row)}, status=202)
    if row is None:
        return HttpResponse(error, status=400, content_type="text/plain; charset=utf-8")
    return redirect("robotlab:chat", pk=thread.pk)


def _control(request: HttpRequest, pk: int, result_pk: int, act: Callable[[Any], Any]) -> HttpResponseBase:
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
    except run_control.RunControlError as exc:
        if _wants_json(request):
            return JsonResponse({"error": str(exc)}, status=409)
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
    if _wants_json(request):
        return JsonResponse({"result": result_summary(row)}, status=202)
    return redirect("robotlab:chat", pk=thread.pk)


@require_POST
def post_answer(request: HttpRequest, pk: int, result_pk: int) -> HttpResponseBase:
    """Answer the question run ``result_pk`` waits on (form field ``answer``) and resume it."""
    text = request.POST.get("answer")
    if text is None:
        return HttpResponse('Send the answer in the "answer" field.', status=400,
                            content_type="text/plain; charset=utf-8")
    return _control(request, pk, result_pk,
                    lambda row: run_control.answer(row, text, request.user, check_owner=False))


@require_POST
def post_cancel(request: HttpRequest, pk: int, result_pk: int) -> HttpResponseBase:
    """Cancel run ``result_pk`` (queued, running or awaiting)."""
    return _control(request, pk, result_pk, lambda row: run_control.cancel(row, request.user, check_owner=False))


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


#: The most stored events one poll returns.
POLL_EVENTS = 1000


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
