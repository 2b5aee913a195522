from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from robotlab.messages import Message, TextMessage, ToolCallMessage, ToolMessage, ToolResultMessage
from robotlab.result import RobotResult

CREATED = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
EPOCH = 1741064767  # CREATED, whole seconds


def answer(text: str = "Hello!", stop_reason: str | None = "stop") -> TextMessage:
    return TextMessage(role="assistant", content=text, stop_reason=stop_reason)


def tool_result() -> ToolResultMessage:
    return ToolResultMessage(
        tool=ToolMessage(id="c1", name="get_weather", input={"city": "Paris"}), content={"data": 22}
    )


def make(**kwargs: Any) -> RobotResult:
    kwargs.setdefault("robot_name", "helper")
    kwargs.setdefault("output", [answer()])
    kwargs.setdefault("created_at", CREATED)
    kwargs.setdefault("id", "r1")
    return RobotResult(**kwargs)


# --- construction ------------------------------------------------------------------------------


def test_defaults() -> None:
    before = datetime.now(UTC)
    result = RobotResult(robot_name="helper")
    assert result.output == [] and result.tool_calls == []
    assert before <= result.created_at <= datetime.now(UTC)
    assert result.created_at.tzinfo is not None
    assert uuid.UUID(result.id).version == 4
    assert (result.prompt, result.history, result.raw, result.stop_reason) == (None, None, None, None)
    assert (result.input_tokens, result.output_tokens, result.cost, result.model) == (0, 0, 0.0, None)
    assert (result.duration, result.delegated_by) == (None, None)


def test_output_accepts_messages_and_dicts() -> None:
    result = make(output=[answer("a"), {"type": "text", "role": "assistant", "content": "b"}])
    assert result.output == [answer("a"), TextMessage(role="assistant", content="b")]


def test_output_none_and_single_message() -> None:
    assert make(output=None).output == []
    assert make(output=answer()).output == [answer()]


def test_output_rejects_other_items() -> None:
    with pytest.raises(TypeError, match="^Invalid message: must be Message or Hash$"):
        make(output=["hello"])


def test_tool_calls_accept_results_and_dicts() -> None:
    as_dict = tool_result().to_dict()
    result = make(tool_calls=[tool_result(), as_dict, {"type": "text", "role": "user", "content": "x"}])
    assert result.tool_calls[0] == tool_result()
    assert isinstance(result.tool_calls[1], ToolResultMessage) and result.tool_calls[1] == tool_result()
    assert result.tool_calls[2] == TextMessage(role="user", content="x")


def test_tool_calls_reject_other_items() -> None:
    with pytest.raises(TypeError, match="^Invalid tool result: must be ToolResultMessage or Hash$"):
        make(tool_calls=[answer()])
    with pytest.raises(TypeError, match="^Invalid tool result: must be ToolResultMessage or Hash$"):
        make(tool_calls=["x"])


def test_invalid_message_dict_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^Invalid role: bot."):
        make(output=[{"role": "bot", "content": "x"}])


def test_created_at_accepts_iso_strings_and_naive_times() -> None:
    assert make(created_at="2025-03-04T05:06:07Z").created_at == CREATED.replace(microsecond=0)
    assert make(created_at=datetime(2025, 3, 4, 5, 6, 7)).created_at == CREATED.replace(microsecond=0)


def test_tokens_and_cost_none_count_as_zero() -> None:
    result = make(input_tokens=None, output_tokens=None, cost=None)
    assert (result.input_tokens, result.output_tokens, result.cost) == (0, 0, 0.0)


def test_mutable_attributes() -> None:
    result = make()
    result.duration = 1.5
    result.delegated_by = "boss"
    result.prompt = [TextMessage(role="user", content="hi")]
    result.history = []
    result.raw = {"id": "x"}
    assert (result.duration, result.delegated_by, result.raw) == (1.5, "boss", {"id": "x"})


# --- reading -----------------------------------------------------------------------------------


def test_last_text_content_and_reply() -> None:
    result = make(
        output=[
            answer("first"),
            ToolCallMessage(role="assistant", tools=[{"id": "1", "name": "a"}]),
            answer("last"),
        ]
    )
    assert result.last_text_content == "last"
    assert result.reply == "last"


def test_last_text_content_skips_non_text() -> None:
    result = make(output=[answer("only"), ToolCallMessage(role="assistant", tools=[])])
    assert result.reply == "only"


def test_last_text_content_none_without_text() -> None:
    assert make(output=[]).reply is None
    assert make(output=[ToolCallMessage(role="assistant", tools=[])]).last_text_content is None


def test_has_tool_calls() -> None:
    assert not make().has_tool_calls
    assert make(output=[ToolCallMessage(role="assistant", tools=[])]).has_tool_calls
    assert make(tool_calls=[tool_result()]).has_tool_calls


@pytest.mark.parametrize(
    ("kwargs", "stopped"),
    [
        ({"output": [answer(stop_reason="stop")]}, True),
        ({"output": [answer(stop_reason=None)]}, True),
        ({"output": [answer(stop_reason="tool")]}, False),
        ({"output": [answer(stop_reason=None)], "tool_calls": [tool_result()]}, False),
        ({"output": [answer(stop_reason="stop")], "tool_calls": [tool_result()]}, True),
        ({"output": [ToolCallMessage(role="assistant", tools=[])]}, False),
        ({"output": []}, False),
    ],
)
def test_is_stopped(kwargs: dict[str, Any], stopped: bool) -> None:
    assert make(**kwargs).is_stopped is stopped


# --- checksum ----------------------------------------------------------------------------------


def test_checksum_recomputed_independently() -> None:
    result = make(output=[answer("Grüße")], tool_calls=[tool_result()])
    payload = (
        '{"output":[{"type":"text","role":"assistant","content":"Grüße","stop_reason":"stop"}],'
        '"tool_calls":[{"type":"tool_result","role":"tool_result",'
        '"tool":{"type":"tool","id":"c1","name":"get_weather","input":{"city":"Paris"}},'
        '"content":{"data":22},"stop_reason":"tool"}],'
        f'"created_at":{EPOCH}}}'
    )
    assert result.checksum == hashlib.sha256(payload.encode("utf-8")).hexdigest()


def test_checksum_uses_whole_epoch_seconds_in_any_zone() -> None:
    base = make().checksum
    assert make(created_at=CREATED.replace(microsecond=0)).checksum == base
    assert make(created_at=CREATED.astimezone(timezone(timedelta(hours=-5)))).checksum == base
    assert make(created_at=CREATED + timedelta(seconds=1)).checksum != base


def test_checksum_ignores_metadata_but_not_content() -> None:
    base = make().checksum
    assert make(id="other", robot_name="x", input_tokens=5, stop_reason="stop").checksum == base
    assert make(output=[answer("different")]).checksum != base


# --- export / to_dict / to_json ----------------------------------------------------------------


def test_export_omits_none_and_zero_tokens() -> None:
    result = make()
    assert result.export() == {
        "robot_name": "helper",
        "output": [{"type": "text", "role": "assistant", "content": "Hello!", "stop_reason": "stop"}],
        "tool_calls": [],
        "created_at": "2025-03-04T05:06:07+00:00",
        "id": "r1",
        "checksum": result.checksum,
    }


def test_export_full_in_order() -> None:
    result = make(stop_reason="stop", input_tokens=10, output_tokens=3, cost=0.25, model="openai/gpt-4o-mini")
    result.duration = 0.0
    result.delegated_by = "boss"
    exported = result.export()
    assert list(exported) == [
        "robot_name",
        "delegated_by",
        "output",
        "tool_calls",
        "created_at",
        "id",
        "checksum",
        "stop_reason",
        "duration",
        "input_tokens",
        "output_tokens",
        "cost",
        "model",
    ]
    assert exported["duration"] == 0.0  # a set value, only None is dropped
    assert (exported["input_tokens"], exported["output_tokens"], exported["cost"]) == (10, 3, 0.25)


def test_export_excludes_debug_fields() -> None:
    result = make(prompt=[TextMessage(role="user", content="hi")], history=[], raw={"x": 1})
    assert not {"prompt", "history", "raw"} & set(result.export())


def test_to_dict_adds_debug_fields() -> None:
    prompt = [TextMessage(role="user", content="hi")]
    result = make(prompt=prompt, history=[], raw={"x": 1})
    full = result.to_dict()
    assert full == {
        **result.export(),
        "prompt": [{"type": "text", "role": "user", "content": "hi"}],
        "history": [],
        "raw": {"x": 1},
    }
    assert make().to_dict() == make().export()


def test_to_json_is_compact_export() -> None:
    result = make(prompt=[TextMessage(role="user", content="hi")])
    text = result.to_json()
    assert json.loads(text) == result.export()
    assert ", " not in text and '": ' not in text


# --- from_dict ---------------------------------------------------------------------------------


def full_result() -> RobotResult:
    result = make(
        output=[
            ToolCallMessage(role="assistant", tools=[{"id": "c1", "name": "get_weather"}]),
            answer("22 degrees"),
        ],
        tool_calls=[tool_result()],
        stop_reason="stop",
        input_tokens=12,
        output_tokens=4,
        cost=0.001,
        model="openai/gpt-4o-mini",
        prompt=[TextMessage(role="system", content="be nice"), TextMessage(role="user", content="weather?")],
        history=[TextMessage(role="user", content="earlier")],
        raw={"id": "resp_1"},
    )
    result.duration = 1.25
    result.delegated_by = "boss"
    return result


def test_from_dict_restores_everything_but_duration_and_delegated_by() -> None:
    original = full_result()
    restored = RobotResult.from_dict(original.to_dict())
    assert restored.robot_name == "helper"
    assert restored.output == original.output
    assert restored.tool_calls == original.tool_calls
    assert isinstance(restored.tool_calls[0], ToolResultMessage)
    assert restored.created_at == CREATED.replace(microsecond=0)
    assert restored.id == "r1"
    assert restored.prompt == original.prompt
    assert restored.history == original.history
    assert restored.raw == {"id": "resp_1"}
    assert restored.stop_reason == "stop"
    assert (restored.input_tokens, restored.output_tokens, restored.cost, restored.model) == (
        12,
        4,
        0.001,
        "openai/gpt-4o-mini",
    )
    assert restored.duration is None
    assert restored.delegated_by is None
    assert restored.checksum == original.checksum


def test_round_trip_via_to_json() -> None:
    original = full_result()
    restored = RobotResult.from_dict(json.loads(original.to_json()))
    assert restored.checksum == original.checksum
    assert restored.reply == "22 degrees"
    assert restored.prompt is None and restored.raw is None  # to_json is export: no debug fields
    expected = original.export()
    del expected["duration"], expected["delegated_by"]
    assert restored.export() == expected


def test_from_dict_minimal() -> None:
    restored = RobotResult.from_dict({"robot_name": "r"})
    assert restored.output == [] and restored.tool_calls == []
    assert restored.created_at.tzinfo is not None
    assert (restored.input_tokens, restored.output_tokens, restored.cost) == (0, 0, 0.0)
    assert restored.prompt is None and restored.history is None


def test_from_dict_accepts_messages_and_datetimes() -> None:
    restored = RobotResult.from_dict({"robot_name": "r", "output": [answer()], "created_at": CREATED})
    assert restored.output == [answer()]
    assert restored.created_at == CREATED


def test_from_dict_dispatches_tool_call_entries() -> None:
    data: dict[str, Any] = {"robot_name": "r", "tool_calls": [tool_result().to_dict()]}
    restored = RobotResult.from_dict(data)
    assert isinstance(restored.tool_calls[0], Message) and restored.tool_calls[0] == tool_result()


# --- pinned on main before the data-model change (stored rows must still verify) ---------------

PINNED_CHECKSUM = "d4a095f6942493a655f5e0c89ec3902fac20b3680f2c5924423a8dd0f1af23bc"
PINNED_JSON = (
    '{"robot_name":"helper","output":[{"type":"text","role":"user","content":"Wie ist das Wetter?"},'
    '{"type":"tool_call","role":"assistant","tools":[{"type":"tool","id":"c1","name":"get_weather",'
    '"input":{"city":"Paris","days":[1,2]}}],"stop_reason":"tool"},{"type":"text","role":"assistant",'
    '"content":"Grüße: 22°C ☀","stop_reason":"stop"}],"tool_calls":[{"type":"tool_result",'
    '"role":"tool_result","tool":{"type":"tool","id":"c1","name":"get_weather","input":{"city":"Paris",'
    '"days":[1,2]}},"content":{"data":{"temp":22.5,"ok":true,"none":null}},"stop_reason":"tool"},'
    '{"type":"tool_result","role":"tool_result","tool":{"type":"tool","id":"c2","name":"fail","input":{}},'
    '"content":{"error":"boom"},"stop_reason":"tool"}],"created_at":"2025-03-04T05:06:07+00:00","id":"r1",'
    f'"checksum":"{PINNED_CHECKSUM}"}}'
)


def pinned() -> RobotResult:
    weather = {"city": "Paris", "days": [1, 2]}
    return make(
        output=[
            TextMessage(role="user", content="Wie ist das Wetter?"),
            ToolCallMessage(role="assistant", tools=[ToolMessage(id="c1", name="get_weather", input=weather)]),
            answer("Grüße: 22°C ☀"),
        ],
        tool_calls=[
            ToolResultMessage(
                tool=ToolMessage(id="c1", name="get_weather", input=weather),
                content={"data": {"temp": 22.5, "ok": True, "none": None}},
            ),
            {"type": "tool_result", "tool": {"id": "c2", "name": "fail"}, "content": {"error": "boom"}},
        ],
    )


def test_checksum_pinned_on_main() -> None:
    """The value computed by the implementation stored rows were written with (main, before the rewrite)."""
    assert pinned().checksum == PINNED_CHECKSUM


def test_to_json_pinned_on_main() -> None:
    assert pinned().to_json() == PINNED_JSON


def test_pinned_result_survives_a_round_trip() -> None:
    restored = RobotResult.from_dict(json.loads(PINNED_JSON))
    assert restored.checksum == PINNED_CHECKSUM and restored.to_json() == PINNED_JSON
