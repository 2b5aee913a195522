"""The same on-busy policy on the other doors: the chat page's POST, and ACP with the official ``acp-sdk`` client.

ACP runs in this process (``httpx.ASGITransport`` in front of the app's ASGI application); its runs execute for real in
background threads, the first one waiting inside its model call (:class:`~tests.robotlab_django.gated_llm.GatedLLM`)
while the second message comes.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from django.urls import include, path, reverse
from django.utils import timezone

from robotlab.testing import text, tool_call
from robotlab_django import services
from robotlab_django.abstract_models import Status
from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.models import RobotResult
from robotlab_django.runs import claims, executor
from tests.robotlab_django.gated_llm import GatedLLM

acp_client = pytest.importorskip("acp_sdk.client")
acp_models = pytest.importorskip("acp_sdk.models")

APP = get_robotlab_asgi_application()
TIMEOUT = 10
URLCONF = types.ModuleType("robotlab_test_busy_urls")
URLCONF.urlpatterns = [path("robotlab/", include("robotlab_django.urls"))]  # type: ignore[attr-defined]


def _page(settings: Any, policy: str) -> tuple[Client, Any, Any]:
    """A logged-in page client, its thread, and a reply running on it (claimed, its worker busy elsewhere)."""
    settings.ROOT_URLCONF = URLCONF
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {"echo": {"on_busy": policy}}}
    user = get_user_model().objects.create_user("ada", password="pw")
    client = Client()
    client.force_login(user)
    thread = services.get_thread(None, user=user)
    thread.robot_name = "echo"
    thread.save(update_fields=["robot_name"])
    running = services.start_run(thread, "echo", "first")
    assert claims.claim(running)
    return client, thread, running


def _post(client: Client, thread: Any, message: str) -> Any:
    return client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": message},
                       HTTP_ACCEPT="application/json")


@pytest.mark.django_db
def test_the_page_says_queued_behind_the_current_reply(settings: Any) -> None:
    client, thread, running = _page(settings, "enqueue")
    response = _post(client, thread, "second")
    assert response.status_code == 202
    body = response.json()
    assert (body["on_busy"], body["behind"], body["notice"]) == ("enqueue", running.pk,
                                                                  "queued behind the current reply")
    assert body["result"]["status"] == "queued"  # held: the sync executor did not run it


@pytest.mark.django_db
def test_the_poll_does_not_blame_a_missing_worker_for_a_held_reply(settings: Any) -> None:
    client, thread, running = _page(settings, "enqueue")
    held = services.start_run(thread, "echo", "second")
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "WORKER_WAIT_HINT": 10}
    long_ago = timezone.now() - timedelta(seconds=30)
    RobotResult.objects.filter(pk__in=[running.pk, held.pk]).update(updated_at=long_ago)
    results = client.get(reverse("robotlab:results_json", kwargs={"pk": thread.pk})).json()["results"]
    assert [result["hint"] for result in results] == ["", "queued behind the current reply"]
    RobotResult.objects.filter(pk=running.pk).update(status=Status.COMPLETED)
    results = client.get(reverse("robotlab:results_json", kwargs={"pk": thread.pk})).json()["results"]
    assert results[-1]["hint"].startswith("No worker has picked this run up")  # now it is the worker's turn


@pytest.mark.django_db
def test_the_page_refuses_a_message_with_409_under_reject(settings: Any) -> None:
    client, thread, running = _page(settings, "reject")
    response = _post(client, thread, "second")
    assert response.status_code == 409
    assert response.json()["error"].startswith("A reply is still running on this thread")
    assert thread.results.count() == 1


# -- ACP, with the official client ------------------------------------------------------------------------------------

@pytest.fixture
async def acp(token: str, settings: Any) -> AsyncIterator[Any]:
    """An ``acp-sdk`` client of ``ada`` in a session; the thread executor. Waits for the runs at the end."""
    client = acp_client.Client(base_url="http://testserver/acp", headers={"Authorization": f"Bearer {token}"},
                               transport=httpx.ASGITransport(app=APP), timeout=TIMEOUT)
    try:
        async with client, client.session() as session:
            yield session
    finally:
        await _drain()
        await sync_to_async(connections.close_all)()


async def _drain() -> None:
    for _ in range(3):  # a run that ends dispatches the one behind it, in a thread of its own
        assert await asyncio.to_thread(executor.join, TIMEOUT)


async def _running(session: Any, settings: Any, llm: GatedLLM, agent: str, policy: str) -> Any:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread", "LLM": lambda: llm,  # a cancel wakes its run
                         "ROBOTS": {agent: {"on_busy": policy}}, "CANCEL_POLL_INTERVAL": 60}  # at once: no polls
    first = await session.run_async("first message", agent=agent)
    assert await asyncio.to_thread(llm.entered.wait, TIMEOUT)
    return first


def _text(run: Any) -> str:
    return "".join(part.content or "" for message in run.output for part in message.parts)


@pytest.mark.django_db(transaction=True)
async def test_acp_enqueue_runs_the_message_after_the_reply(acp: Any, settings: Any) -> None:
    llm = GatedLLM(text("first reply"), text("second reply"))
    first = await _running(acp, settings, llm, "echo", "enqueue")
    second = await acp.run_async("second message", agent="echo")
    assert second.status.value == "created" and second.session_id == first.session_id
    llm.gate.set()
    await _drain()
    done = [await acp.run_status(run_id=run.run_id) for run in (first, second)]
    assert [(run.status.value, _text(run)) for run in done] == [("completed", "first reply"),
                                                                ("completed", "second reply")]


@pytest.mark.django_db(transaction=True)
async def test_acp_reject_is_the_protocols_error(acp: Any, settings: Any) -> None:
    llm = GatedLLM(text("first reply"))
    await _running(acp, settings, llm, "echo", "reject")
    try:
        with pytest.raises(acp_models.ACPError) as refused:
            await acp.run_async("second message", agent="echo")
    finally:
        llm.gate.set()
    assert refused.value.error.code == "invalid_input"
    assert refused.value.error.message.startswith("A reply is still running on this thread")


@pytest.mark.django_db(transaction=True)
async def test_acp_interrupt_cancels_the_reply_with_its_partial_text(acp: Any, settings: Any) -> None:
    llm = GatedLLM(text("the new answer"), partial="I was saying ")
    first = await _running(acp, settings, llm, "echo", "interrupt")
    second = await acp.run_async("do this instead", agent="echo")
    await _drain()
    old, new = [await acp.run_status(run_id=run.run_id) for run in (first, second)]
    assert (old.status.value, _text(old)) == ("cancelled", "I was saying ")
    assert (new.status.value, _text(new)) == ("completed", "the new answer")
    llm.gate.set()


@pytest.mark.django_db(transaction=True)
async def test_acp_steer_adds_the_message_to_the_running_reply(acp: Any, settings: Any) -> None:
    llm = GatedLLM(tool_call("add", a=2, b=2), text("4, and hello"))
    first = await _running(acp, settings, llm, "calculator", "steer")
    second = await acp.run_async("also say hello", agent="calculator")
    llm.gate.set()
    await _drain()
    reply, steered = [await acp.run_status(run_id=run.run_id) for run in (first, second)]
    assert (reply.status.value, _text(reply)) == ("completed", "4, and hello")
    assert (steered.status.value, steered.output) == ("completed", [])  # no reply of its own: it joined the first
    assert llm.requests[1].messages[-1] == {"role": "user", "content": "also say hello"}
