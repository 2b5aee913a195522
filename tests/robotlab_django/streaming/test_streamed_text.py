"""The text a run streamed, attempt by attempt: what a protocol stream sends, and what a cancelled run keeps."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab_django.models import RobotResult, RunEvent, Status
from robotlab_django.runs import watch
from robotlab_django.runs.records import start_run
from robotlab_django.streaming.streamed_text import Chunk, StreamedText, attempt_texts


def _events(row: int, *items: Any) -> list[dict[str, Any]]:
    """``"started"`` (a run's start), ``("step", task)`` or text (``(task, text)`` or ``text``) as event dicts."""
    events: list[dict[str, Any]] = []
    for item in items:
        if item == "started":
            events.append({"kind": "run.started", "result_id": row})
        elif isinstance(item, tuple) and item[0] == "step":
            events.append({"kind": "step.started", "task": item[1], "result_id": row})
        else:
            task, text = item if isinstance(item, tuple) else ("", item)
            events.append({"kind": "text.delta", "text": text, "result_id": row, **({"task": task} if task else {})})
    return events


def _send(stream: StreamedText, events: list[dict[str, Any]]) -> list[Chunk]:
    return [chunk for event in events for chunk in stream.feed(event)]


def test_a_new_attempt_that_repeats_the_text_sent_sends_only_what_is_new() -> None:
    stream = StreamedText(1)
    first = _send(stream, _events(1, "started", "word0 ", "word1 ", "wo"))
    again = _send(stream, _events(1, "started", "word0 ", "word1 word2 ", "word3."))
    assert first == [Chunk("", "word0 "), Chunk("", "word1 "), Chunk("", "wo")]
    assert again == [Chunk("", "rd2 "), Chunk("", "word3.")]
    assert stream.close() == []
    assert "".join(chunk.text for chunk in first + again) == "word0 word1 word2 word3."


def test_a_new_attempt_that_says_otherwise_or_less_replaces_the_text() -> None:
    stream = StreamedText(1)
    _send(stream, _events(1, "started", "Hello there, ", "friend"))
    assert _send(stream, _events(1, "started", "Hello ", "you")) == [Chunk("", "Hello you", replace=True)]
    assert _send(stream, _events(1, "!")) == [Chunk("", "!")]
    shorter = StreamedText(1)
    _send(shorter, _events(1, "started", "One two three"))
    assert _send(shorter, _events(1, "started", "One two")) == []
    assert shorter.close() == [Chunk("", "One two", replace=True)]


def test_the_task_rows_of_a_turn_restart_at_their_steps_each_on_its_own() -> None:
    stream = StreamedText(1)
    sent = _send(stream, [*_events(1, "started"), *_events(2, ("step", "a"), ("a", "alpha ")),
                          *_events(3, ("step", "b"), ("b", "beta")), *_events(2, ("step", "a"), ("a", "alpha "),
                                                                               ("a", "again"))])
    assert sent == [Chunk("a", "alpha "), Chunk("b", "beta"), Chunk("a", "again")]
    texts, last = attempt_texts([*_events(2, ("step", "a"), ("a", "alpha ")), *_events(3, ("step", "b"), ("b", "b")),
                                 *_events(2, ("step", "a"), ("a", "A"))], 1)
    assert texts == {(2, "a"): "A", (3, "b"): "b"} and last == (2, "a")


@pytest.mark.django_db
def test_a_cancelled_run_executed_again_keeps_the_text_of_its_last_attempt() -> None:
    row = start_run("s1", "echo", "Go")
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RUNNING)
    for seq, (kind, data) in enumerate([("run.started", {}), ("text.delta", {"text": "word0 word1 "}),
                                        ("run.started", {}), ("text.delta", {"text": "word0 "})], 1):
        RunEvent.objects.create(thread_id=row.thread_id, result=row, run_id=row.run_id, seq=seq, kind=kind, ts=0.0,
                                data=data)
    assert watch.streamed_reply(row) == "word0 "
