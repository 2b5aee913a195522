"""The chat pages: login, ownership, CSRF, history on reload, escaping, the polling endpoint."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import include, path, reverse
from django.utils import timezone

from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django.chat import views
from robotlab_django.models import RobotResult, Status, Thread

pytestmark = pytest.mark.django_db

URLCONF = types.ModuleType("robotlab_test_view_urls")
URLCONF.urlpatterns = [path("robotlab/", include("robotlab_django.urls"))]  # type: ignore[attr-defined]

PAYLOAD = "<script>alert('pwned')</script>"


@pytest.fixture(autouse=True)
def _urls(settings: Any) -> None:
    settings.ROOT_URLCONF = URLCONF


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice", password="pw")


@pytest.fixture
def bob() -> Any:
    return get_user_model().objects.create_user("bob", password="pw")


def logged_in(user: Any, **options: Any) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def new_thread(user: Any, robot: str = "echo") -> Thread:
    return Thread.objects.create(user=user, robot_name=robot)


def test_every_page_needs_a_login(alice: Any) -> None:
    thread = new_thread(alice)
    client = Client()
    for url in (reverse("robotlab:thread_list"), reverse("robotlab:chat", kwargs={"pk": thread.pk}),
                reverse("robotlab:results_json", kwargs={"pk": thread.pk})):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")
    response = client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "hi"},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 403
    assert not RobotResult.objects.exists()


def test_thread_list_shows_only_my_threads(alice: Any, bob: Any) -> None:
    mine, theirs = new_thread(alice), new_thread(bob)
    Thread.objects.filter(pk=mine.pk).update(last_user_message="my question")
    Thread.objects.filter(pk=theirs.pk).update(last_user_message="their secret")
    response = logged_in(alice).get(reverse("robotlab:thread_list"))
    assert response.status_code == 200
    assert "my question" in response.text
    assert "their secret" not in response.text
    assert reverse("robotlab:chat", kwargs={"pk": mine.pk}) in response.text


def test_creating_a_thread_opens_its_chat(alice: Any) -> None:
    response = logged_in(alice).post(reverse("robotlab:thread_list"), {"robot": "calculator"})
    thread = Thread.objects.get()
    assert (thread.user, thread.robot_name) == (alice, "calculator")
    assert response.status_code == 302
    assert response["Location"] == reverse("robotlab:chat", kwargs={"pk": thread.pk})


def test_creating_a_thread_with_an_unknown_robot_is_refused(alice: Any) -> None:
    response = logged_in(alice).post(reverse("robotlab:thread_list"), {"robot": "nope"})
    assert response.status_code == 400
    assert not Thread.objects.exists()


def test_another_users_thread_is_a_404(alice: Any, bob: Any) -> None:
    thread = new_thread(bob)
    client = logged_in(alice)
    assert client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).status_code == 404
    assert client.get(reverse("robotlab:results_json", kwargs={"pk": thread.pk})).status_code == 404
    response = client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "hi"})
    assert response.status_code == 404
    assert not RobotResult.objects.exists()


def test_posting_needs_the_csrf_token(alice: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm("hello")
    thread = new_thread(alice)
    client = logged_in(alice, enforce_csrf_checks=True)
    url = reverse("robotlab:post_message", kwargs={"pk": thread.pk})
    assert client.post(url, {"message": "hi"}, HTTP_ACCEPT="application/json").status_code == 403
    assert not RobotResult.objects.exists()
    client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk}))  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    response = client.post(url, {"message": "hi"}, HTTP_ACCEPT="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 202


def test_posting_queues_a_run_and_returns_its_summary(alice: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm("Hello Alice")
    thread = new_thread(alice)
    response = logged_in(alice).post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}),
                                     {"message": "  hi there  "}, HTTP_ACCEPT="application/json")
    assert response.status_code == 202
    row = RobotResult.objects.get()
    summary = response.json()["result"]
    assert summary["run_id"] == row.run_id
    assert (summary["sequence_number"], summary["input"], summary["robot"]) == (1, "hi there", "echo")
    assert summary["status"] == Status.COMPLETED  # the test settings execute runs at once ("sync")
    assert summary["reply"] == "Hello Alice"


def test_posting_without_javascript_redirects_to_the_chat(alice: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm("ok")
    thread = new_thread(alice)
    response = logged_in(alice).post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "hi"})
    assert response.status_code == 302
    assert response["Location"] == reverse("robotlab:chat", kwargs={"pk": thread.pk})


def test_an_empty_or_too_long_message_is_refused(alice: Any, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_MESSAGE_LENGTH": 5}
    thread = new_thread(alice)
    client = logged_in(alice)
    url = reverse("robotlab:post_message", kwargs={"pk": thread.pk})
    empty = client.post(url, {"message": "   "}, HTTP_ACCEPT="application/json")
    assert (empty.status_code, empty.json()) == (400, {"error": "Type a message first."})
    long = client.post(url, {"message": "too long"}, HTTP_ACCEPT="application/json")
    assert long.status_code == 400
    assert "the limit is 5" in long.json()["error"]
    assert not RobotResult.objects.exists()


def test_the_chat_shows_history_after_a_reload(alice: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_call("add", a=2, b=3), text("2 + 3 is 5."), text("Second answer."))
    thread = new_thread(alice, "calculator")
    client = logged_in(alice)
    url = reverse("robotlab:post_message", kwargs={"pk": thread.pk})
    client.post(url, {"message": "What is 2 + 3?"})
    client.post(url, {"message": "And again?"})
    page = client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).text
    order = [page.index(part) for part in ("What is 2 + 3?", ">add<", "2 + 3 is 5.", "And again?", "Second answer.")]
    assert order == sorted(order)
    assert 'src="/static/robotlab/robotlab.js"' in page
    assert f'data-ws-path="/ws/robotlab/threads/{thread.pk}/"' in page


def test_stored_model_output_is_escaped(alice: Any) -> None:
    thread = new_thread(alice)
    RobotResult.objects.create(
        thread=thread, sequence_number=1, robot_name="echo", status=Status.COMPLETED, input=PAYLOAD, reply=PAYLOAD,
        messages=[{"role": "user", "content": PAYLOAD},
                  {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "c1", "type": "function", "function": {"name": PAYLOAD, "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "name": "x", "content": PAYLOAD},
                  {"role": "assistant", "content": PAYLOAD}])
    RobotResult.objects.create(thread=thread, sequence_number=2, robot_name="echo", status=Status.FAILED,
                               input="boom", error=PAYLOAD)
    Thread.objects.filter(pk=thread.pk).update(last_user_message=PAYLOAD)
    client = logged_in(alice)
    page = client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).text
    listing = client.get(reverse("robotlab:thread_list")).text
    for html in (page, listing):
        assert "<script>alert" not in html
    assert page.count("&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;") == 4  # user, badge, reply, error


def test_the_results_endpoint_lists_runs_since_a_sequence_number(alice: Any) -> None:
    thread = new_thread(alice)
    for number, status in ((1, Status.COMPLETED), (2, Status.FAILED), (3, Status.RUNNING)):
        RobotResult.objects.create(thread=thread, sequence_number=number, robot_name="echo", status=status,
                                   input=f"m{number}", reply=f"r{number}" if number == 1 else "",
                                   error="bad" if number == 2 else "", error_type="ValueError" if number == 2 else "")
    client = logged_in(alice)
    url = reverse("robotlab:results_json", kwargs={"pk": thread.pk})
    data = client.get(url, {"since": 2}).json()
    assert [(r["sequence_number"], r["status"], r["is_finished"]) for r in data["results"]] == [
        (2, "failed", True), (3, "running", False)]
    assert data["results"][0]["error"] == "bad"
    assert len(client.get(url).json()["results"]) == 3
    assert len(client.get(url, {"since": "x"}).json()["results"]) == 3


def test_a_run_cancelled_while_running_is_stopping_until_its_runner_stored_its_end(alice: Any) -> None:
    """Until its runner stopped, a cancelled run's reply is the text streamed at the cancel: a poll of the page
    must not end the reply with it (the run may stream a little more), its ``run.cancelled`` does."""
    from robotlab_django.runs import control, watch
    from robotlab_django.streaming.event_stream import publish_events

    thread = new_thread(alice)
    rows = [RobotResult.objects.create(thread=thread, sequence_number=number, robot_name="echo", input="m",
                                       status=Status.RUNNING) for number in (1, 2)]
    client = logged_in(alice)
    url = reverse("robotlab:results_json", kwargs={"pk": thread.pk})
    assert [r["stopping"] for r in client.get(url).json()["results"]] == [False, False]
    stopped, lost = (control.cancel(row, alice) for row in rows)
    assert [(r["status"], r["stopping"]) for r in client.get(url).json()["results"]] == [("cancelled", True)] * 2
    publish_events(stopped, watch.cancelled_events(stopped))  # its runner stopped: run.cancelled, stream.ended
    RobotResult.objects.filter(pk=lost.pk).update(  # a runner that never stops (its worker was lost)
        finished_at=lost.finished_at - timezone.timedelta(seconds=watch.STOP_GRACE + 1))
    assert [r["stopping"] for r in client.get(url).json()["results"]] == [False, False]


def test_a_failed_run_shows_its_error(alice: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(raise_(RuntimeError("model unavailable")))
    thread = new_thread(alice)
    client = logged_in(alice)
    response = client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "hi"},
                           HTTP_ACCEPT="application/json")
    assert response.json()["result"]["status"] == "failed"
    page = client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).text
    assert "model unavailable" in page
    assert "rl-message assistant failed" in page


def test_anonymous_visitors_own_their_session_threads_when_login_is_off(
        settings: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    settings.ROBOTLAB_CHAT_LOGIN_REQUIRED = False
    scripted_llm("hi stranger")
    visitor, other = Client(), Client()
    response = visitor.post(reverse("robotlab:thread_list"), {"robot": "echo"})
    thread = Thread.objects.get()
    assert thread.user is None
    assert response["Location"] == reverse("robotlab:chat", kwargs={"pk": thread.pk})
    post = visitor.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "hello"},
                        HTTP_ACCEPT="application/json")
    assert post.json()["result"]["reply"] == "hi stranger"
    assert visitor.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).status_code == 200
    assert other.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).status_code == 404


def test_the_page_announces_the_demo_model(alice: Any, settings: Any) -> None:
    client = logged_in(alice)
    assert "offline demo model" in client.get(reverse("robotlab:thread_list")).text
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": None}
    assert "offline demo model" not in client.get(reverse("robotlab:thread_list")).text


def test_default_robot(settings: Any) -> None:
    assert views.default_robot() == "calculator"  # no "chat" robot in the test app: the first name
    settings.ROBOTLAB_CHAT_ROBOT = "echo"
    assert views.default_robot() == "echo"


def test_the_page_resumes_after_the_finished_runs_events(alice: Any) -> None:
    from robotlab_django.models import RunEvent

    thread = new_thread(alice)
    done = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="echo", status=Status.COMPLETED)
    url = reverse("robotlab:chat", kwargs={"pk": thread.pk})
    client = logged_in(alice)
    assert 'data-cursor="0"' in client.get(url).text
    old = [RunEvent.objects.create(thread=thread, result=done, run_id=done.run_id, seq=n, kind="text.delta", ts=0.0)
           for n in (1, 2)]
    assert f'data-cursor="{old[-1].pk}"' in client.get(url).text
    running = RobotResult.objects.create(thread=thread, sequence_number=2, robot_name="echo", status=Status.RUNNING)
    assert f'data-cursor="{old[-1].pk}"' in client.get(url).text  # no events of the running run yet
    RunEvent.objects.create(thread=thread, result=running, run_id=running.run_id, seq=1, kind="run.started", ts=0.0)
    page = client.get(url).text
    assert f'data-cursor="{old[-1].pk}"' in page
    assert running.run_id in page  # listed as pending for the script


def test_the_results_endpoint_streams_stored_events_after_a_cursor(
        alice: Any, bob: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_call("add", a=1, b=2), text("1 + 2 is 3."))
    thread = new_thread(alice, "calculator")
    client = logged_in(alice)
    client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "1 + 2?"})
    url = reverse("robotlab:results_json", kwargs={"pk": thread.pk})
    assert "events" not in client.get(url).json()
    events = client.get(url, {"after": 0}).json()["events"]
    kinds = [event["kind"] for event in events]
    assert kinds[0] == "run.started" and "tool_call.started" in kinds and "run.completed" in kinds
    assert "".join(e["text"] for e in events if e["kind"] == "text.delta") == "1 + 2 is 3."
    cursors = [event["cursor"] for event in events]
    assert cursors == sorted(cursors)
    later = client.get(url, {"after": cursors[2]}).json()["events"]
    assert [event["cursor"] for event in later] == cursors[3:]
    other = new_thread(bob)
    assert client.get(reverse("robotlab:results_json", kwargs={"pk": other.pk}), {"after": 0}).status_code == 404


def test_a_thread_is_titled_by_its_first_message(alice: Any) -> None:
    """Issue 17: the list names a conversation by how it started, not by its latest message."""
    thread = new_thread(alice)
    Thread.objects.filter(pk=thread.pk).update(initial_input="Plan my trip to Lisbon",
                                               last_user_message="and the weather?")
    html = logged_in(alice).get(reverse("robotlab:thread_list")).content.decode()
    assert "Plan my trip to Lisbon" in html and "and the weather?" not in html


ACCOUNT_URLCONF = types.ModuleType("robotlab_test_account_urls")
ACCOUNT_URLCONF.urlpatterns = [  # type: ignore[attr-defined]
    *URLCONF.urlpatterns, path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls)]


def test_the_header_offers_logout_and_the_admin_to_staff(alice: Any, settings: Any) -> None:
    """Issue 17: the chat header links the admin (staff only) and logs out, when the site routes them."""
    html = logged_in(alice).get(reverse("robotlab:thread_list")).content.decode()
    assert "rl-logout" not in html and "rl-admin-link" not in html  # no such URLs: no broken links
    settings.ROOT_URLCONF = ACCOUNT_URLCONF
    html = logged_in(alice).get(reverse("robotlab:thread_list")).content.decode()
    assert 'action="/accounts/logout/"' in html and "rl-admin-link" not in html
    alice.is_staff = True
    alice.save()
    html = logged_in(alice).get(reverse("robotlab:thread_list")).content.decode()
    assert 'class="rl-admin-link" href="/admin/"' in html


def test_the_chat_header_names_the_conversation_not_its_uuid(alice: Any) -> None:
    """Issue 17: the header showed the thread's raw session UUID; it shows the first message, the UUID on hover."""
    thread = new_thread(alice)
    page = logged_in(alice).get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).content.decode()
    assert '<small class="rl-meta" id="rl-thread-title" title="' + str(thread.session_id) + '">New conversation' in page
    Thread.objects.filter(pk=thread.pk).update(initial_input="Plan my <trip> to Lisbon")
    page = logged_in(alice).get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).content.decode()
    assert ">Plan my &lt;trip&gt; to Lisbon</small>" in page
    assert f">{thread.session_id}<" not in page


def test_the_pages_send_a_strict_content_security_policy(alice: Any, settings: Any) -> None:
    """Nothing off the site loads, whatever a reply's Markdown says; the websocket may connect to the page's host."""
    import re

    thread = new_thread(alice)
    client = logged_in(alice)
    for url in (reverse("robotlab:thread_list"), reverse("robotlab:chat", kwargs={"pk": thread.pk}),
                reverse("robotlab:results_json", kwargs={"pk": thread.pk})):
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(item.strip().split(" ", 1) for item in policy.split(";"))
        assert directives["default-src"] == "'self'" and directives["script-src"] == "'self'"
        assert directives["img-src"] == "'self' data: blob:" and directives["style-src"] == "'self'"
        assert directives["connect-src"] == "'self' ws://testserver wss://testserver"
        assert directives["object-src"] == "'none'" and "unsafe-inline" not in policy
    page = client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).text
    # the only inline <script> is json_script's data block, which a browser does not run
    inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", page)
    assert inline == [' id="rl-pending" type="application/json"'], inline
    assert " style=" not in page and not re.search(r"\son[a-z]+=", page)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "CONTENT_SECURITY_POLICY": ""}
    assert "Content-Security-Policy" not in client.get(reverse("robotlab:thread_list"))


AUTH_URLCONF = types.ModuleType("robotlab_test_view_auth_urls")
AUTH_URLCONF.urlpatterns = [  # type: ignore[attr-defined]
    path("accounts/", include("django.contrib.auth.urls")), path("admin/", admin.site.urls),
    path("", include("robotlab_django.urls"))]


def _log_out(client: Client) -> Any:
    """Press the page's "Log out": post its form with its fields, following the redirects."""
    import re

    page = client.get(reverse("robotlab:thread_list")).text
    form = re.search(r'<form method="post" action="([^"]+)" class="rl-logout">(.*?)</form>', page, re.DOTALL)
    assert form, page
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.group(2)))
    return client.post(form.group(1), fields, follow=True)


def test_log_out_lands_on_the_login_page_not_the_admins(alice: Any, settings: Any) -> None:
    """Without LOGOUT_REDIRECT_URL, Django's LogoutView shows the admin's "Logged out" page: the chat's own
    "Log out" asks for the chat instead, which sends a logged-out visitor to the login page."""
    settings.ROOT_URLCONF = AUTH_URLCONF
    assert not getattr(settings, "LOGOUT_REDIRECT_URL", None)
    response = _log_out(logged_in(alice))
    assert response.redirect_chain, response.templates
    assert response.request["PATH_INFO"] == "/accounts/login/"
    assert 'id="rl-login"' in response.text and "Log in again" not in response.text
    settings.LOGOUT_REDIRECT_URL = "/bye/"  # a project's own choice wins
    response = _log_out(logged_in(alice))
    assert response.redirect_chain[0][0] == "/bye/"
