"""Run attachments in the app: stored with the row (so any worker sends them), bounded in size, and taken from ACP
image and file parts."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from robotlab import Attachment, AttachmentError
from robotlab.testing import FakeLLM
from robotlab_django import services
from robotlab_django.acp.wire import agent_manifest, input_content
from robotlab_django.models import RobotResult
from robotlab_django.runs import executor
from robotlab_django.runs.records import AttachmentsTooLargeError, start_run
from robotlab_django.runs.runnables import RobotWork, prepare
from robotlab_django.runs.transcript import run_items

pytestmark = pytest.mark.django_db

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
PNG_B64 = base64.b64encode(PNG).decode()
PNG_URL = f"data:image/png;base64,{PNG_B64}"


def _user_content(llm: FakeLLM, index: int = -1) -> Any:
    return llm.requests[index].messages[-1]["content"]


def test_the_row_stores_the_attachments_and_the_run_sends_them(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm("A dot.", "Still a dot.")
    row = services.start_run("pics", "echo", "What is this?",
                             attachments=[Attachment(data=PNG, mime_type="image/png", name="dot.png")])
    stored = RobotResult.objects.get(pk=row.pk)  # what a worker reads: the row, not this process's memory
    assert stored.attachments == [{"mime_type": "image/png", "name": "dot.png", "data": PNG_B64}]
    executor.dispatch(row)
    row.refresh_from_db()
    assert row.status == "completed" and row.reply == "A dot."
    assert _user_content(llm) == [{"type": "text", "text": "What is this?"},
                                  {"type": "image_url", "image_url": {"url": PNG_URL}}]
    assert row.messages[0]["content"][1]["image_url"]["url"] == PNG_URL  # the history keeps the image
    follow_up = services.start_run("pics", "echo", "And now?")
    executor.dispatch(follow_up)
    assert llm.requests[1].messages[1]["content"][1] == {"type": "image_url", "image_url": {"url": PNG_URL}}
    assert _user_content(llm) == "And now?"


def test_the_transcript_names_the_files_without_their_data(scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm("Both seen.")
    row = services.run_robot("pics", "echo", "Compare", attachments=[
        Attachment(data=PNG, mime_type="image/png"), "https://example.com/cat.jpg",
        Attachment(data=b"%PDF-1.4", mime_type="application/pdf", name="report.pdf")])
    user = run_items(row)[0]
    assert (user.kind, user.text) == ("user", "Compare\n[image: data:image/png;base64]\n"
                                               "[image: https://example.com/cat.jpg]\n[file: report.pdf]")


def test_prepare_gives_the_robot_the_rows_attachments(scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm("ok")
    row = start_run("pics", "echo", "Look", attachments=["https://example.com/cat.jpg"])
    work = prepare(RobotResult.objects.get(pk=row.pk))
    assert isinstance(work, RobotWork)
    assert work.attachments == [{"mime_type": "image/jpeg", "url": "https://example.com/cat.jpg"}]


def test_re_running_the_last_message_sends_its_attachments_again(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm("one", "two")
    executor.dispatch(start_run("pics", "echo", "Look", attachments=[Attachment(data=PNG, mime_type="image/png")]))
    again = executor.rerun_last_user_message("pics")
    assert again.attachments == [{"mime_type": "image/png", "data": PNG_B64}]
    assert _user_content(llm)[1] == {"type": "image_url", "image_url": {"url": PNG_URL}}


def test_a_network_turn_gives_its_robots_the_rows_attachments(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm("billing", "Your invoice shows two mugs.")
    row = services.run_robot("net-pics", "helpdesk", "Is this invoice right?",
                             attachments=[Attachment(data=PNG, mime_type="image/png", name="invoice.png")])
    assert row.status == "completed" and row.reply == "Your invoice shows two mugs."
    assert _user_content(llm, 0)[1] == {"type": "image_url", "image_url": {"url": PNG_URL}}  # the classifier
    assert _user_content(llm, 1)[1] == {"type": "image_url", "image_url": {"url": PNG_URL}}  # the specialist


def test_a_distributed_turns_tasks_send_the_turns_attachments(scripted_llm: Callable[..., FakeLLM],
                                                                settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    llm = scripted_llm("billing", "Your invoice shows two mugs.")
    turn = start_run("dist-pics", "helpdesk", "Is this invoice right?",
                     attachments=[Attachment(data=PNG, mime_type="image/png")])
    executor.dispatch(turn)  # each task is a job of its own, which reads the turn's row
    turn.refresh_from_db()
    assert turn.status == "completed" and RobotResult.objects.filter(parent_id=turn.pk).count() == 2
    assert [_user_content(llm, index)[1] for index in (0, 1)] == [
        {"type": "image_url", "image_url": {"url": PNG_URL}}] * 2


def test_too_large_or_bad_attachments_write_nothing(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENT_BYTES": len(PNG) * 2 - 1}
    two = [Attachment(data=PNG, mime_type="image/png")] * 2
    with pytest.raises(AttachmentsTooLargeError, match=r"limit is \d+ \(ROBOTLAB\['MAX_ATTACHMENT_BYTES'\]\)"):
        start_run("pics", "echo", "Look", attachments=two)
    with pytest.raises(AttachmentError, match="no such file"):
        start_run("pics", "echo", "Look", attachments=["/no/such/file.png"])
    assert not RobotResult.objects.exists()
    start_run("pics", "echo", "Look", attachments=two[:1])
    assert RobotResult.objects.count() == 1


# -- ACP ---------------------------------------------------------------------------------------


def test_acp_parts_become_text_and_attachments() -> None:
    text, files = input_content([{"parts": [
        {"content_type": "text/plain", "content": "Compare these"},
        {"content_type": "image/png", "content": PNG_B64, "content_encoding": "base64", "name": "dot.png"},
        {"content_type": "image/jpeg", "content_url": "https://example.com/cat.jpg"},
        {"content_type": "text/markdown", "content": "# Notes", "name": "notes.md"},
        {"content_type": "application/pdf", "content": base64.b64encode(b"%PDF-1.4").decode(),
         "content_encoding": "base64", "name": "report.pdf"},
    ]}, {"parts": [{"content": "please"}]}])
    assert text == "Compare these\nplease"
    assert [(f.kind, f.mime_type, f.name) for f in files] == [
        ("image", "image/png", "dot.png"), ("image", "image/jpeg", None), ("text", "text/markdown", "notes.md"),
        ("file", "application/pdf", "report.pdf")]
    assert files[0].data == PNG and files[1].url == "https://example.com/cat.jpg"
    assert "image/*" in agent_manifest("echo")["input_content_types"]


@pytest.mark.parametrize(("part", "says"), [
    ({"content_type": "video/mp4", "content": "AAAA", "content_encoding": "base64"}, "video/mp4 cannot be sent"),
    ({"content_type": "application/pdf", "content_url": "https://example.com/a.pdf"}, "only images can be sent"),
    ({"content_type": "image/png", "content_url": "file:///etc/passwd"}, "must be an http(s) or data: URL"),
    ({"content_type": "image/png", "content": "not base64!", "content_encoding": "base64"}, "not valid base64"),
    ({"content_type": "image/png"}, "has neither content nor content_url"),
])
def test_bad_acp_parts_are_invalid_input_naming_the_part(part: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match="Part 2 of message 1") as caught:
        input_content([{"parts": [{"content": "hi"}, part]}])
    assert says in str(caught.value)



def _post_run(token: str, parts: list[dict[str, Any]]) -> Any:
    return Client().post("/acp/runs", data={"agent_name": "echo", "mode": "sync", "input": [{"parts": parts}]},
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_an_acp_image_part_reaches_the_model(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm("A single dot.")
    response = _post_run(token, [{"content_type": "text/plain", "content": "What is this?"},
                                 {"content_type": "image/png", "content": PNG_B64, "content_encoding": "base64"}])
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "completed"
    assert _user_content(llm)[1] == {"type": "image_url", "image_url": {"url": PNG_URL}}
    assert RobotResult.objects.get().attachments == [{"mime_type": "image/png", "data": PNG_B64}]


def test_acp_refuses_too_large_and_bad_files(token: str, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENT_BYTES": len(PNG) - 1}
    image = {"content_type": "image/png", "content": PNG_B64, "content_encoding": "base64"}
    response = _post_run(token, [{"content": "Look"}, image])
    assert response.status_code == 413
    assert response.json()["code"] == "invalid_input" and "MAX_ATTACHMENT_BYTES" in response.json()["message"]
    response = _post_run(token, [{"content": "Look"}, {"content_type": "video/mp4", "content": "AAAA",
                                                       "content_encoding": "base64"}])
    assert response.status_code == 422 and "Part 2 of message 1" in response.json()["message"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = _post_run(token, [{"content": "Look"}, image])
    assert response.status_code == 413 and "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["message"]
    assert not RobotResult.objects.exists()


# -- how many files, and from where --------------------------------------------------------


def test_too_many_attachments_write_nothing(settings: Any) -> None:
    from robotlab_django.conf import app_settings
    from robotlab_django.runs.records import TooManyAttachmentsError

    assert app_settings.MAX_ATTACHMENTS == 20
    image = Attachment(data=PNG, mime_type="image/png")
    with pytest.raises(TooManyAttachmentsError, match=r"21 files; the limit is 20 \(ROBOTLAB\['MAX_ATTACHMENTS'\]\)"):
        start_run("pics", "echo", "Look", attachments=[image] * 21)
    with pytest.raises(TooManyAttachmentsError):  # counted before a single one is decoded
        start_run("pics", "echo", "Look", attachments=[{"mime_type": "image/png", "data": "!"}] * 5_000)
    with pytest.raises(TooManyAttachmentsError):  # and a generator once it is read
        start_run("pics", "echo", "Look", attachments=(image for _ in range(21)))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENTS": 2}
    with pytest.raises(TooManyAttachmentsError, match="limit is 2"):
        start_run("pics", "echo", "Look", attachments=[image] * 3)
    assert not RobotResult.objects.exists()
    start_run("pics", "echo", "Look", attachments=[image] * 2)
    assert RobotResult.objects.count() == 1


def test_acp_refuses_too_many_files(token: str, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENTS": 2}
    image = {"content_type": "image/png", "content": PNG_B64, "content_encoding": "base64"}
    response = _post_run(token, [{"content": "Look"}, *[image] * 3])
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "invalid_input" and "MAX_ATTACHMENTS" in response.json()["message"]
    assert not RobotResult.objects.exists()


PRIVATE_URLS = [
    "http://169.254.169.254/latest/meta-data/iam.png", "http://127.0.0.1:8000/a.png", "http://localhost/a.png",
    "http://10.1.2.3/a.png", "http://192.168.0.1/a.png", "http://172.16.0.1/a.png", "http://[::1]/a.png",
    "http://[fe80::1]/a.png", "http://[::ffff:169.254.169.254]/a.png", "http://2130706433/a.png",
    "http://0x7f.1/a.png", "http://0.0.0.0/a.png", "http://100.64.0.1/a.png", "http://user@127.0.0.1/a.png",
    "http://240.0.0.1/a.png", "http://224.0.0.1/a.png", "http://[fc00::1]/a.png",
]


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_image_urls_on_private_addresses_are_refused(url: str) -> None:
    from robotlab_django.runs.records import PrivateAttachmentURLError

    with pytest.raises(PrivateAttachmentURLError, match="not a public address") as caught:
        start_run("pics", "echo", "Look", attachments=[url])
    assert isinstance(caught.value, ValueError)
    assert not RobotResult.objects.exists()


def test_image_urls_on_public_addresses_pass() -> None:
    row = start_run("pics", "echo", "Look", attachments=["https://93.184.215.14/cat.jpg", "http://[2606:4700::1]/a.png"])
    assert [item["url"] for item in row.attachments] == ["https://93.184.215.14/cat.jpg", "http://[2606:4700::1]/a.png"]


def test_acp_refuses_a_link_local_image_url(token: str) -> None:
    response = _post_run(token, [{"content": "Look"}, {"content_type": "image/png",
                                                       "content_url": "http://169.254.169.254/latest/x.png"}])
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "invalid_input" and "169.254.169.254" in response.json()["message"]
    assert not RobotResult.objects.exists()
