"""``RunAgentInput`` as the server reads it: the new message's text and files, and resume payloads as answers."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from robotlab_django.agui.inputs import InputError, ResumeEntry, answer_text, parse_input

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _body(content: Any, **extra: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": [{"id": "a", "role": "assistant", "content": "Hi"},
                                                        {"id": "u", "role": "user", "content": content}], **extra}


def test_the_last_user_message_is_the_runs_text_and_files() -> None:
    parts = [{"type": "text", "text": "What is this?"},
             {"type": "image", "source": {"type": "data", "value": base64.b64encode(PNG).decode(),
                                          "mimeType": "image/png"}},
             {"type": "image", "source": {"type": "url", "value": "https://example.com/cat.jpg"}},
             {"type": "binary", "mimeType": "image/png", "data": base64.b64encode(PNG).decode(), "filename": "x.png"}]
    found = parse_input(_body(parts, state={"k": 1}))
    assert found.text == "What is this?" and found.state == {"k": 1} and found.message is not None
    assert [(file.mime_type, file.url, file.name) for file in found.attachments] == [
        ("image/png", None, None), ("image/jpeg", "https://example.com/cat.jpg", None), ("image/png", None, "x.png")]


@pytest.mark.parametrize(("content", "message"), [
    ([{"type": "image", "source": {"type": "data", "value": "not base64!", "mimeType": "image/png"}}],
     "messages[1].content[0].source.value is not valid base64"),
    ([{"type": "image", "source": {"type": "url", "value": "ftp://x/a.png"}}], "must be an http(s) or data: URL"),
    ([{"type": "document", "source": {"type": "file", "value": "file-123"}}], "a provider's file id is not taken"),
    ([{"type": "video", "source": {"type": "data", "value": base64.b64encode(b"x").decode(), "mimeType": "video/mp4"}}],
     "messages[1].content[0]: Attachment"),
    ([{"kind": "text"}], "must be a text part"),
    ("  ", "messages[1] is empty"),
])
def test_a_bad_message_says_which_part_and_why(content: Any, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        parse_input(_body(content))


def test_resume_payloads_become_answers() -> None:
    question = {"request_id": "q", "question": "Which?", "choices": ["a", "b"]}
    approval = {**question, "type": "approval", "tool": "update_note"}
    assert answer_text(ResumeEntry("q", "resolved", "b"), question) == "b"
    assert answer_text(ResumeEntry("q", "resolved", {"answer": "a"}), question) == "a"
    assert answer_text(ResumeEntry("q", "resolved", {"approved": False}), approval) == "deny"
    assert answer_text(ResumeEntry("q", "resolved", "approve"), approval) == "approve"
    with pytest.raises(InputError, match="asks a question: its payload is the answer"):
        answer_text(ResumeEntry("q", "resolved", {"approved": True}), question)
    with pytest.raises(InputError, match="waits for the approval of a tool call"):
        answer_text(ResumeEntry("q", "resolved", None), approval)
    resumed = parse_input({"threadId": "t", "runId": "r2", "messages": [],
                           "resume": [{"interruptId": "q", "status": "resolved", "payload": "a"}]})
    assert resumed.resume == [ResumeEntry("q", "resolved", "a")] and resumed.message is None
