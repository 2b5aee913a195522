"""The typed event model: a class per kind, read from and written to the one wire dict, and consumers' tables."""

from __future__ import annotations

import dataclasses
import json
import threading
import types
import typing
from typing import Any, assert_never, get_args

import pytest

import robotlab
from robotlab import streaming
from robotlab.errors import InferenceError
from robotlab.network import create_network
from robotlab.streaming import (
    ALL_EVENTS,
    EVENT_TYPES,
    Dropped,
    Event,
    EventKind,
    Handled,
    Handling,
    OtherEvent,
    RunFailed,
    RunStarted,
    StepFailed,
    StreamEvent,
    TextDelta,
    ToolCallStarted,
    TypedEvent,
    UnhandledEventKindError,
    handled_kinds,
    handling_table,
    parse_event,
)
from robotlab.testing.fake import FakeLLM, raise_, text, tool_call
from robotlab.tools import AskUser
from robotlab.tools.ask import QueueChannel


def test_every_kind_has_one_class_and_the_union_names_them_all() -> None:
    kinds = [str(cls.__dataclass_fields__["kind"].default) for cls in EVENT_TYPES]
    assert tuple(kinds) == ALL_EVENTS
    assert set(get_args(StreamEvent)) == {*EVENT_TYPES, OtherEvent}
    for cls, kind in zip(EVENT_TYPES, kinds, strict=True):
        assert streaming.event_type(kind) is cls
        assert cls.__doc__ and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert get_args(typing.get_type_hints(cls)["kind"]) == (kind,)
    assert streaming.event_type("made.up") is OtherEvent


def _events_of_real_runs() -> list[Event]:
    """What a robot (a tool call, a question answered), a failing one and a network emit."""
    events: list[Event] = []
    llm = FakeLLM([tool_call("robot_lab--ask_user", question="Which plan?", choices=["Basic", "Pro"]),
                   text("You chose Pro.")])
    robot = robotlab.build(name="support", llm=llm, local_tools=[AskUser])
    channel = QueueChannel(timeout=5)
    robot.ask_channel = channel
    answerers: list[threading.Thread] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if event.kind == "hitl.requested":
            answerers.append(threading.Thread(target=channel.answer, args=(event.data["request_id"], "2")))
            answerers[-1].start()

    robot.run("Upgrade me", on_event=on_event, run_id="r1")
    for answerer in answerers:
        answerer.join(5)
    broken = robotlab.build(name="broken", llm=FakeLLM([raise_(InferenceError("provider down"))]))
    with pytest.raises(InferenceError):
        broken.run("go", on_event=events.append, run_id="r2")
    network = create_network(name="fan")
    network.task("ok", robotlab.build(name="ok", llm=FakeLLM(["fine"])))
    network.task("bad", robotlab.build(name="bad", llm=FakeLLM([raise_(InferenceError("provider down"))])))
    network.task("after", robotlab.build(name="after", llm=FakeLLM(["recovered"])), depends_on=["ok", "bad"])
    network.run("go", on_event=events.append, run_id="r3")
    return events


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the declared type ``hint`` (unions, ``list[str]``, ``dict[str, Any]``, ``Any``)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arm) for arm in get_args(hint))
    if origin is typing.Literal:
        return value in get_args(hint)
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, get_args(hint)[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def test_the_events_of_real_runs_read_back_exactly_and_carry_the_declared_types() -> None:
    events = _events_of_real_runs()
    assert set(ALL_EVENTS) - {event.kind for event in events} >= {"run.interrupted", "part.created"}
    seen = set()
    for event in events:
        wire = event.to_dict()
        typed = parse_event(wire)
        seen.add(type(typed))
        assert type(typed) is streaming.event_type(event.kind) and typed == event.typed()
        assert json.dumps(typed.to_dict()) == json.dumps(wire)  # byte for byte: key order and nulls kept
        assert typed.to_event() == event
        hints = typing.get_type_hints(type(typed))
        for field in dataclasses.fields(typed):
            if field.name in event.data:
                assert _conforms(event.data[field.name], hints[field.name]), (event.kind, field.name, event.data)
        assert typed.extra == {}, f"{event.kind} carries keys its class does not name: {dict(typed.extra)}"
    assert {cls.__name__ for cls in seen} >= {
        "RunStarted", "RunCompleted", "RunFailed", "StepStarted", "StepCompleted", "TextDelta", "ToolCallStarted",
        "ToolCallCompleted", "UsageUpdated", "HitlRequested", "HitlResolved", "StreamEnded"}


def test_a_typed_event_built_from_fields_is_the_wire_dict_of_its_kind() -> None:
    started = RunStarted(run_id="r", seq=1, ts=2.5, robot="bob", message=None)
    assert started.to_dict() == {"kind": "run.started", "run_id": "r", "seq": 1, "ts": 2.5, "robot": "bob",
                                 "message": None}  # message is always there; an unset tag is not
    failed = StepFailed(run_id="r", seq=2, ts=3.0, network="n", task="t", robot="bob", error="x", error_type="E")
    assert list(failed.to_dict()) == ["kind", "run_id", "seq", "ts", "network", "task", "robot", "error",
                                      "error_type"]
    assert Event.from_dict(failed.to_dict()).typed() == failed
    delta = TextDelta.from_dict({"kind": "text.delta", "run_id": "r", "seq": 3, "ts": 1.0, "text": "hi",
                                 "cursor": 7})
    assert delta.text == "hi" and delta.extra == {"cursor": 7}
    changed = dataclasses.replace(delta, text="yo")  # a changed copy is written from its fields
    assert changed.to_dict() == {"kind": "text.delta", "run_id": "r", "seq": 3, "ts": 1.0, "text": "yo", "cursor": 7}
    with pytest.raises(ValueError, match="no TextDelta"):
        TextDelta.from_event(failed.to_event())
    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.text = "no"  # type: ignore[misc]


def test_an_unknown_kind_reads_as_other_event_and_an_old_event_without_a_field_still_reads() -> None:
    other = parse_event({"kind": "vendor.thing", "run_id": "r", "seq": 1, "ts": 1.0, "level": 3})
    assert isinstance(other, OtherEvent) and other.kind == "vendor.thing" and other.extra == {"level": 3}
    assert other.to_dict() == {"kind": "vendor.thing", "run_id": "r", "seq": 1, "ts": 1.0, "level": 3}
    old = parse_event({"kind": "tool_call.started", "run_id": "r", "seq": 2, "ts": 1.0, "name": "add"})
    assert isinstance(old, ToolCallStarted) and old.name == "add" and old.id == "" and old.arguments is None


def _describe(event: StreamEvent) -> str:
    """A consumer written against the union: mypy fails it when a class is added and not matched."""
    match event:
        case TextDelta(text=piece):
            return piece
        case RunFailed(error=error) | StepFailed(error=error):
            return f"failed: {error}"
        case OtherEvent(kind=kind):
            return f"unknown {kind}"
        case _:
            return event.kind


def test_consumers_match_on_the_union() -> None:
    events = [Event("text.delta", "r", 1, 0.0, {"text": "hi"}), Event("run.failed", "r", 2, 0.0, {"error": "x"}),
              Event("x.y", "r", 3, 0.0, {}), Event("stream.ended", "r", 4, 0.0, {})]
    assert [_describe(event.typed()) for event in events] == ["hi", "failed: x", "unknown x.y", "stream.ended"]


def _page_like(kind: EventKind) -> Handling[str]:
    match kind:
        case "text.delta":
            return Handled("append", "adds the text")
        case _ if kind in ALL_EVENTS:
            return Dropped("not shown")
        case _:
            assert_never(kind)  # type: ignore[arg-type]  # reached by the kind the test adds


def test_a_kind_a_consumer_does_not_handle_fails_its_table() -> None:
    table = handling_table("test consumer", _page_like)
    assert set(table) == set(ALL_EVENTS) and handled_kinds(table) == {"text.delta"}
    assert streaming.consumers()["test consumer"] is _page_like
    with pytest.raises(UnhandledEventKindError, match="test consumer does not handle 'test.added'"):
        handling_table("test consumer", _page_like, kinds=(*ALL_EVENTS, "test.added"))


def test_typed_events_are_frozen_slotted_dataclasses() -> None:
    for cls in (*EVENT_TYPES, OtherEvent, TypedEvent):
        assert "__slots__" in vars(cls), cls
