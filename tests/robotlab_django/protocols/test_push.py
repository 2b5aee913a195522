"""A2A push notifications in process (the ``sync`` executor, the instant demo model): the URL policy, the config
operations over JSON-RPC for their owner only, and signed notifications reaching a real webhook (an HTTP server
thread of the test) as the task changes state.

The retried delivery through a Celery worker, with the SDK's client, is in tests/example_project/test_a2a.py.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from robotlab_django.protocols import push
from robotlab_django.protocols.push_models import PushNotificationConfig
from tests.robotlab_django.webhook import Webhook, serve_webhook

pytest.importorskip("a2a.server.routes.jsonrpc_dispatcher")

#: Seconds a test waits for a notification.
WAIT = 10.0


@pytest.fixture
def webhook(settings: Any) -> Iterator[Webhook]:
    """A receiver thread, with the settings allowing it (a loopback host, so ``A2A_PUSH_PRIVATE`` too)."""
    with serve_webhook() as hook:
        prefix = hook.url.rsplit("/", 1)[0] + "/"
        settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_URLS": [prefix], "A2A_PUSH_PRIVATE": True}
        yield hook


def _rpc(token: str, method: str, params: dict[str, Any], agent: str = "echo") -> dict[str, Any]:
    answer = Client().post(f"/a2a/{agent}/", {"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}",
                           HTTP_A2A_VERSION="1.0")
    return dict(answer.json())


def _send(text: str, **configuration: Any) -> dict[str, Any]:
    return {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]},
            "configuration": configuration}


def test_only_urls_under_an_allowed_prefix_on_public_hosts_pass(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_URLS": []}
    with pytest.raises(push.WebhookURLError, match="off"):
        push.check_url("https://8.8.8.8/hooks/a")
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_URLS": ["https://8.8.8.8/hooks", "http://127.0.0.1:9/in/"]}
    assert push.check_url("https://8.8.8.8/hooks/a?x=1") == "https://8.8.8.8/hooks/a?x=1"
    assert push.check_url("https://8.8.8.8/hooks")
    for url in ("http://8.8.8.8/hooks/a", "https://8.8.8.8:8443/hooks/a", "https://8.8.8.8/hooksevil",
                "https://8.8.8.8.evil.example/hooks/a", "https://user:pw@8.8.4.4/hooks/a", "ftp://8.8.8.8/hooks/a",
                "https://8.8.8.8/other"):
        with pytest.raises(push.WebhookURLError, match="A2A_PUSH_URLS|http") as refused:
            push.check_url(url)
        assert "pw" not in str(refused.value)  # credentials in a URL are never repeated
    with pytest.raises(push.WebhookURLError, match="loopback.*A2A_PUSH_PRIVATE"):
        push.check_url("http://127.0.0.1:9/in/hook")  # allowed by prefix, but not a public address
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_PRIVATE": True}
    assert push.check_url("http://127.0.0.1:9/in/hook")


@pytest.mark.django_db
def test_configs_are_created_read_listed_and_deleted_by_their_owner_only(token: str, webhook: Webhook) -> None:
    task = _rpc(token, "SendMessage", _send("hello"))["result"]["task"]
    card = Client().get("/a2a/echo/.well-known/agent-card.json").json()
    assert card["capabilities"]["pushNotifications"] is True
    created = _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": webhook.url})["result"]
    assert created["taskId"] == task["id"] and created["url"] == webhook.url and len(created["token"]) > 20
    mine = _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine", "url": webhook.url,
                                                            "token": "client-secret"})["result"]
    assert mine["id"] == "mine" and mine["token"] == "client-secret"
    got = _rpc(token, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"})["result"]
    assert got == mine
    listed = _rpc(token, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})["result"]["configs"]
    assert [config["id"] for config in listed] == [created["id"], "mine"]

    get_user_model().objects.create_user("bob", password="pw")
    out = io.StringIO()
    call_command("robotlab_token", "bob", stdout=out)
    bob = out.getvalue().strip().splitlines()[-1]
    for method, params in [("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": webhook.url}),
                           ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"}),
                           ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
                           ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"})]:
        error = _rpc(bob, method, params)["error"]
        assert error["code"] == -32001 and "No task" in error["message"], (method, error)  # TaskNotFoundError
    assert PushNotificationConfig.objects.count() == 2

    assert _rpc(token, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"})["result"] is None
    assert _rpc(token, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"})["error"]["code"] == -32001
    assert _rpc(token, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "mine"})["error"]


@pytest.mark.django_db
def test_a_url_the_settings_do_not_allow_is_a_clear_json_rpc_error(token: str, webhook: Webhook,
                                                                    settings: Any) -> None:
    task = _rpc(token, "SendMessage", _send("hello"))["result"]["task"]
    error = _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"],
                                                             "url": "http://169.254.169.254/latest/"})["error"]
    assert error["code"] == -32602 and "Webhook refused" in error["message"] and "A2A_PUSH_URLS" in error["message"]
    refused = _rpc(token, "SendMessage", _send("again", taskPushNotificationConfig={"url": "https://example.org/x"}))
    assert refused["error"]["code"] == -32602
    assert PushNotificationConfig.objects.count() == 0 and _rpc(token, "ListTasks", {})["result"]["totalSize"] == 1
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_URLS": []}  # off: not supported, and the card says so
    error = _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": webhook.url})["error"]
    assert error["code"] == -32003 and "off" in error["message"]
    card = Client().get("/a2a/echo/.well-known/agent-card.json").json()
    assert not card["capabilities"].get("pushNotifications")


@pytest.mark.django_db
def test_each_state_change_reaches_the_webhook_signed(token: str, webhook: Webhook,
                                                      django_capture_on_commit_callbacks: Any) -> None:
    config = {"url": webhook.url, "token": "s3cret", "authentication": {"scheme": "Bearer", "credentials": "abc"}}
    with django_capture_on_commit_callbacks(execute=True):
        task = _rpc(token, "SendMessage", _send("hello", taskPushNotificationConfig=config))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert webhook.wait_for(2, WAIT)
    assert webhook.states() == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]  # each state once, in order
    for headers, body in webhook.received:
        expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        assert headers[push.SIGNATURE_HEADER] == expected and headers[push.TOKEN_HEADER] == "s3cret"
        assert headers["Authorization"] == "Bearer abc"
        assert json.loads(body)["task"]["id"] == task["id"]
    done = json.loads(webhook.received[-1][1])["task"]
    assert done["artifacts"] == task["artifacts"] and done["contextId"] == task["contextId"]


@pytest.mark.django_db
def test_a_webhook_no_longer_allowed_gets_nothing(token: str, webhook: Webhook, settings: Any,
                                                  django_capture_on_commit_callbacks: Any) -> None:
    from robotlab_django.a2a.push import deliver

    task = _rpc(token, "SendMessage", _send("hello"))["result"]["task"]
    _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "c", "url": webhook.url})
    stored = PushNotificationConfig.objects.get()
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_PRIVATE": False}  # checked again at delivery
    assert deliver(stored.pk, "TASK_STATE_COMPLETED") == "refused"
    assert webhook.received == []
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_PRIVATE": True}
    assert deliver(stored.pk, "TASK_STATE_COMPLETED") == "sent" and webhook.states() == ["TASK_STATE_COMPLETED"]


def test_a_checked_url_is_sent_to_the_address_its_host_was_checked_at(settings: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_URLS": ["https://hooks.example:8443/in/", "https://8.8.8.8/"],
                         "A2A_PUSH_PRIVATE": False}
    answers = iter([[ipaddress.ip_address("2001:4860:4860::8888")], [ipaddress.ip_address("10.0.0.1")]])
    monkeypatch.setattr(push, "resolved_addresses", lambda host, port: next(answers))  # DNS: public, then private
    bound = push.pinned("https://user:pw@hooks.example:8443/in/a?x=1")
    assert bound.url == "https://user:pw@[2001:4860:4860::8888]:8443/in/a?x=1"
    assert bound.headers == {"Host": "hooks.example:8443"} and bound.extensions == {"sni_hostname": "hooks.example"}
    with pytest.raises(push.WebhookURLError, match="10.0.0.1 is private"):  # each delivery checks it again
        push.pinned("https://hooks.example:8443/in/a")
    monkeypatch.setattr(push, "resolved_addresses", lambda host, port: [ipaddress.ip_address(host)])
    assert push.pinned("https://8.8.8.8/a") == ("https://8.8.8.8/a", {}, {})  # an address needs no binding
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_PRIVATE": True}
    assert push.pinned("https://hooks.example:8443/in/a") == ("https://hooks.example:8443/in/a", {}, {})


@pytest.mark.django_db
def test_a_delivery_connects_to_the_checked_address_not_to_the_name_again(
        token: str, webhook: Webhook, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from robotlab_django.a2a.push import deliver

    port = int(webhook.url.split(":")[2].split("/")[0])
    url = f"http://hooks.rebind.invalid:{port}/hooks/a2a"  # a name no resolver answers: only the checked address
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_URLS": [url]}
    task = _rpc(token, "SendMessage", _send("hello"))["result"]["task"]
    _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "c", "url": url})
    settings.ROBOTLAB = {**settings.ROBOTLAB, "A2A_PUSH_PRIVATE": False}
    checked: list[str] = []

    def resolve(host: str, port: int | None) -> list[Any]:  # DNS, checked once: the receiver's address
        checked.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    monkeypatch.setattr(push, "resolved_addresses", resolve)
    monkeypatch.setattr(push, "non_public_address", lambda address: None)  # taken as public for this test
    assert deliver(PushNotificationConfig.objects.get().pk, "TASK_STATE_COMPLETED") == "sent"
    assert checked == ["hooks.rebind.invalid"] and webhook.states() == ["TASK_STATE_COMPLETED"]
    assert webhook.received[0][0]["Host"] == f"hooks.rebind.invalid:{port}"


@pytest.mark.django_db
def test_a_retry_of_a_state_the_task_has_left_is_not_sent(token: str, webhook: Webhook) -> None:
    from robotlab_django.a2a.push_task import send_push_notification

    task = _rpc(token, "SendMessage", _send("hello"))["result"]["task"]
    _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "c", "url": webhook.url})
    pk = PushNotificationConfig.objects.get().pk
    # the task completed: a retried "working" would reach the webhook after "completed"
    assert send_push_notification.apply(args=(pk, "TASK_STATE_WORKING"), retries=1).get() == "superseded"
    assert webhook.received == []
    assert send_push_notification.apply(args=(pk, "TASK_STATE_COMPLETED"), retries=1).get() == "sent"
    assert send_push_notification.apply(args=(pk, "TASK_STATE_WORKING")).get() == "sent"  # a first try is sent
    assert webhook.states() == ["TASK_STATE_COMPLETED", "TASK_STATE_WORKING"]


@pytest.mark.django_db
def test_a_question_waits_for_its_row_so_the_notification_carries_it(token: str, webhook: Webhook,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The event of a question is stored before the row says ``awaiting``: the notification waits for the row."""
    from robotlab_django.a2a import push as a2a_push
    from robotlab_django.models import RobotResult

    task = _rpc(token, "SendMessage", _send("hello"))["result"]["task"]
    _rpc(token, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "c", "url": webhook.url})
    row = RobotResult.objects.get()
    RobotResult.objects.filter(pk=row.pk).update(status="running")
    waits: list[float] = []

    def parked_meanwhile(seconds: float) -> None:  # the run parks while the notification waits
        waits.append(seconds)
        RobotResult.objects.filter(pk=row.pk).update(status="awaiting", question={"question": "Which plan?"})

    monkeypatch.setattr(a2a_push.time, "sleep", parked_meanwhile)
    assert a2a_push.deliver(PushNotificationConfig.objects.get().pk, "TASK_STATE_INPUT_REQUIRED") == "sent"
    status = json.loads(webhook.received[0][1])["task"]["status"]
    assert len(waits) == 1 and status["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert status["message"]["parts"][0]["text"] == "Which plan?"
