from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum

import pytest

from robotlab.messages import (
    Message,
    TextMessage,
    ToolCallMessage,
    ToolMessage,
    ToolResultMessage,
    UserMessage,
)


class Role(Enum):
    USER = "user"


# --- Message -----------------------------------------------------------------------------------


def test_constants() -> None:
    assert Message.VALID_TYPES == ("text", "tool_call", "tool_result")
    assert Message.VALID_ROLES == ("system", "user", "assistant", "tool_result")
    assert Message.VALID_STOP_REASONS == ("tool", "stop")


def test_base_message_stores_strings() -> None:
    message = Message(type="text", role="user", content="Hello")
    assert (message.type, message.role, message.content, message.stop_reason) == (
        "text",
        "user",
        "Hello",
        None,
    )


def test_enum_values_are_stored_as_strings() -> None:
    message = Message(type="text", role=Role.USER, content="Hi")
    assert message.role == "user"
    assert type(message.role) is str


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        (
            {"type": "image", "role": "user"},
            "Invalid message type: image. Must be one of: text, tool_call, tool_result",
        ),
        (
            {"type": "text", "role": "bot"},
            "Invalid role: bot. Must be one of: system, user, assistant, tool_result",
        ),
        (
            {"type": "text", "role": "user", "stop_reason": "length"},
            "Invalid stop_reason: length. Must be one of: tool, stop",
        ),
    ],
)
def test_validation_errors_use_the_seed_wording(kwargs: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError) as info:
        Message(content="x", **kwargs)
    assert str(info.value) == error


def test_empty_stop_reason_is_invalid_not_absent() -> None:
    with pytest.raises(ValueError, match="Invalid stop_reason: . Must be one of: tool, stop"):
        TextMessage(role="user", content="x", stop_reason="")


@pytest.mark.parametrize(
    ("message", "true_predicates"),
    [
        (TextMessage(role="user", content="hi"), {"is_text", "is_user"}),
        (TextMessage(role="system", content="be nice"), {"is_text", "is_system"}),
        (
            TextMessage(role="assistant", content="ok", stop_reason="stop"),
            {"is_text", "is_assistant", "is_stopped"},
        ),
        (
            ToolCallMessage(role="assistant", tools=[]),
            {"is_tool_call", "is_assistant", "is_tool_stop"},
        ),
        (
            ToolResultMessage(tool={"id": "1", "name": "t"}, content={"data": 1}),
            {"is_tool_result", "is_tool_stop"},
        ),
    ],
)
def test_predicates(message: Message, true_predicates: set[str]) -> None:
    names = {
        "is_text",
        "is_tool_call",
        "is_tool_result",
        "is_system",
        "is_user",
        "is_assistant",
        "is_stopped",
        "is_tool_stop",
    }
    assert {name for name in names if getattr(message, name)} == true_predicates


def test_to_dict_drops_none_only() -> None:
    assert TextMessage(role="user", content="Hello").to_dict() == {
        "type": "text",
        "role": "user",
        "content": "Hello",
    }
    assert TextMessage(role="user", content="").to_dict() == {"type": "text", "role": "user", "content": ""}
    assert TextMessage(role="user", content=None).to_dict() == {"type": "text", "role": "user"}
    assert TextMessage(role="assistant", content="x", stop_reason="stop").to_dict()["stop_reason"] == "stop"


def test_to_json_is_compact() -> None:
    assert (
        TextMessage(role="user", content="héllo").to_json()
        == '{"type":"text","role":"user","content":"héllo"}'
    )


def test_equality_by_value() -> None:
    assert TextMessage(role="user", content="a") == TextMessage(role="user", content="a")
    assert TextMessage(role="user", content="a") != TextMessage(role="user", content="b")
    assert TextMessage(role="user", content="a") != Message(type="text", role="user", content="a")
    assert TextMessage(role="user", content="a") != "a"


def test_repr_names_the_class() -> None:
    assert repr(TextMessage(role="user", content="a")).startswith("TextMessage(type='text'")


# --- Message.from_dict -------------------------------------------------------------------------


def test_from_dict_defaults_to_text() -> None:
    message = Message.from_dict({"role": "user", "content": "Hello"})
    assert message == TextMessage(role="user", content="Hello")


def test_from_dict_accepts_enum_keys_and_values() -> None:
    class Key(Enum):
        ROLE = "role"
        CONTENT = "content"

    message = Message.from_dict({Key.ROLE: Role.USER, Key.CONTENT: "Hi"})
    assert message == TextMessage(role="user", content="Hi")


def test_from_dict_dispatches_by_type() -> None:
    tool = {"type": "tool", "id": "call_1", "name": "get_weather", "input": {"location": "Paris"}}
    call = Message.from_dict({"type": "tool_call", "role": "assistant", "tools": [tool]})
    assert isinstance(call, ToolCallMessage)
    assert call.tools == [ToolMessage(id="call_1", name="get_weather", input={"location": "Paris"})]
    assert call.stop_reason == "tool"

    result = Message.from_dict(
        {"type": "tool_result", "role": "tool_result", "tool": tool, "content": {"data": 1}}
    )
    assert isinstance(result, ToolResultMessage)
    assert result.tool.name == "get_weather"
    assert result.data == 1


def test_from_dict_unknown_type_goes_to_the_base_and_fails_validation() -> None:
    with pytest.raises(ValueError, match="^Invalid message type: image. Must be one of"):
        Message.from_dict({"type": "image", "role": "user", "content": "x"})


@pytest.mark.parametrize(
    "message",
    [
        TextMessage(role="user", content="Hello"),
        TextMessage(role="assistant", content="Done", stop_reason="stop"),
        ToolCallMessage(role="assistant", tools=[ToolMessage(id="1", name="a", input={"x": 1})]),
        ToolResultMessage(tool=ToolMessage(id="1", name="a"), content={"error": "boom"}),
    ],
)
def test_round_trip_through_json(message: Message) -> None:
    assert Message.from_dict(json.loads(message.to_json())) == message
    assert Message.from_dict(message.to_dict()) == message


# --- ToolMessage -------------------------------------------------------------------------------


def test_tool_message() -> None:
    tool = ToolMessage(id="tool_123", name="get_weather", input={"location": "Paris"})
    assert tool.to_dict() == {
        "type": "tool",
        "id": "tool_123",
        "name": "get_weather",
        "input": {"location": "Paris"},
    }
    assert json.loads(tool.to_json()) == tool.to_dict()
    assert not isinstance(tool, Message)


def test_tool_message_input_none_becomes_empty_dict() -> None:
    assert ToolMessage(id="1", name="a").input == {}
    assert ToolMessage(id="1", name="a", input=None).to_dict()["input"] == {}


def test_tool_message_from_dict_accepts_arguments_alias() -> None:
    assert ToolMessage.from_dict({"id": "1", "name": "a", "arguments": {"x": 1}}).input == {"x": 1}
    assert ToolMessage.from_dict(
        {"id": "1", "name": "a", "input": {"y": 2}, "arguments": {"x": 1}}
    ).input == {"y": 2}
    assert ToolMessage.from_dict({"id": "1", "name": "a"}).input == {}


def test_tool_message_equality() -> None:
    assert ToolMessage(id="1", name="a") == ToolMessage(id="1", name="a", input={})
    assert ToolMessage(id="1", name="a") != ToolMessage(id="2", name="a")


# --- ToolCallMessage ---------------------------------------------------------------------------


def test_tool_call_message() -> None:
    call = ToolCallMessage(
        role="assistant",
        tools=[
            ToolMessage(id="call_1", name="get_weather", input={"location": "Paris"}),
            {"id": "c2", "name": "b"},
        ],
    )
    assert call.content is None
    assert call.stop_reason == "tool"
    assert all(isinstance(tool, ToolMessage) for tool in call.tools)
    assert call.to_dict() == {
        "type": "tool_call",
        "role": "assistant",
        "tools": [
            {"type": "tool", "id": "call_1", "name": "get_weather", "input": {"location": "Paris"}},
            {"type": "tool", "id": "c2", "name": "b", "input": {}},
        ],
        "stop_reason": "tool",
    }


def test_tool_call_message_stop_reason_none_means_tool() -> None:
    assert ToolCallMessage(role="assistant", tools=[], stop_reason=None).stop_reason == "tool"
    assert ToolCallMessage(role="assistant", tools=[], stop_reason="stop").stop_reason == "stop"


def test_tool_call_message_tools_none_is_empty() -> None:
    assert ToolCallMessage(role="assistant", tools=None).tools == []


def test_tool_call_message_rejects_invalid_tools() -> None:
    with pytest.raises(TypeError, match="^Invalid tool: must be ToolMessage or Hash$"):
        ToolCallMessage(role="assistant", tools=["get_weather"])


def test_tool_call_message_validates_role() -> None:
    with pytest.raises(ValueError, match="^Invalid role: robot."):
        ToolCallMessage(role="robot", tools=[])


# --- ToolResultMessage -------------------------------------------------------------------------


def test_tool_result_success() -> None:
    result = ToolResultMessage(
        tool=ToolMessage(id="call_1", name="get_weather", input={"location": "Berlin"}),
        content={"data": {"temperature": 15}},
    )
    assert (result.role, result.type, result.stop_reason) == ("tool_result", "tool_result", "tool")
    assert result.is_success and not result.is_error
    assert result.data == {"temperature": 15}
    assert result.error is None


def test_tool_result_error() -> None:
    result = ToolResultMessage(tool={"id": "1", "name": "a"}, content={"error": "Location is required"})
    assert result.is_error and not result.is_success
    assert result.error == "Location is required"
    assert result.data is None


def test_tool_result_with_plain_content() -> None:
    result = ToolResultMessage(tool={"id": "1", "name": "a"}, content="sunny")
    assert not result.is_success and not result.is_error
    assert result.data is None and result.error is None


def test_tool_result_to_dict_is_not_compacted() -> None:
    result = ToolResultMessage(tool={"id": "1", "name": "a"}, content=None)
    assert result.to_dict() == {
        "type": "tool_result",
        "role": "tool_result",
        "tool": {"type": "tool", "id": "1", "name": "a", "input": {}},
        "content": None,
        "stop_reason": "tool",
    }


def test_tool_result_stop_reason() -> None:
    assert ToolResultMessage(tool={"id": "1", "name": "a"}, content=1, stop_reason=None).stop_reason == "tool"
    with pytest.raises(ValueError, match="^Invalid stop_reason: done."):
        ToolResultMessage(tool={"id": "1", "name": "a"}, content=1, stop_reason="done")


def test_tool_result_rejects_invalid_tool() -> None:
    with pytest.raises(TypeError, match="^Invalid tool: must be ToolMessage or Hash$"):
        ToolResultMessage(tool="a", content=1)


# --- UserMessage -------------------------------------------------------------------------------


def test_user_message_defaults() -> None:
    before = datetime.now(UTC)
    message = UserMessage("What is the weather?")
    assert message.content == "What is the weather?"
    assert message.session_id is None and message.system_prompt is None
    assert message.metadata == {}
    assert uuid.UUID(message.id).version == 4
    assert message.created_at.tzinfo is not None
    assert before <= message.created_at <= datetime.now(UTC)
    assert str(message) == "What is the weather?"


def test_user_message_content_is_converted_to_str() -> None:
    assert UserMessage(42).content == "42"
    assert UserMessage(None).content == ""


def test_user_message_options() -> None:
    message = UserMessage(
        "Hi", session_id="thread_123", system_prompt="Respond in Spanish", metadata={"user_id": "u"}, id="m1"
    )
    assert (message.session_id, message.system_prompt, message.metadata, message.id) == (
        "thread_123",
        "Respond in Spanish",
        {"user_id": "u"},
        "m1",
    )


def test_user_message_to_message() -> None:
    assert UserMessage("Hi").to_message() == TextMessage(role="user", content="Hi")


def test_user_message_to_dict_and_json() -> None:
    message = UserMessage("Hi", session_id="s1", id="m1")
    message.created_at = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    expected = {
        "content": "Hi",
        "session_id": "s1",
        "metadata": {},
        "id": "m1",
        "created_at": "2025-01-02T03:04:05+00:00",
    }
    assert message.to_dict() == expected
    assert message.to_json() == json.dumps(expected, separators=(",", ":"))
    assert datetime.fromisoformat(message.to_dict()["created_at"]) == message.created_at.replace(
        microsecond=0
    )


def test_user_message_created_at_keeps_its_offset() -> None:
    message = UserMessage("Hi")
    message.created_at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC).astimezone(timezone(timedelta(hours=2)))
    assert message.to_dict()["created_at"] == "2025-01-02T05:04:05+02:00"


def test_coerce_user_message_is_returned_as_is() -> None:
    message = UserMessage("Hi")
    assert UserMessage.coerce(message) is message


def test_coerce_str() -> None:
    assert UserMessage.coerce("Hello").content == "Hello"


def test_coerce_dict() -> None:
    message = UserMessage.coerce(
        {
            "content": "Hi",
            "session_id": "s",
            "system_prompt": "p",
            "metadata": {"k": 1},
            "id": "m1",
            "other": 1,
        }
    )
    assert (message.content, message.session_id, message.system_prompt, message.metadata, message.id) == (
        "Hi",
        "s",
        "p",
        {"k": 1},
        "m1",
    )


def test_coerce_text_message() -> None:
    assert UserMessage.coerce(TextMessage(role="assistant", content="Hello")).content == "Hello"


def test_coerce_anything_else_uses_str() -> None:
    assert UserMessage.coerce(3.5).content == "3.5"


def test_user_message_equality() -> None:
    message = UserMessage("Hi", id="m1")
    twin = UserMessage("Hi", id="m1")
    twin.created_at = message.created_at
    assert message == twin
    assert message != UserMessage("Hi", id="m2")


def test_user_message_from_dict_reads_what_coerce_reads() -> None:
    message = UserMessage.from_dict({"content": "Hi", "session_id": "s", "metadata": {"k": 1}, "id": "m1"})
    assert (message.content, message.session_id, message.metadata, message.id) == ("Hi", "s", {"k": 1}, "m1")
    assert uuid.UUID(UserMessage.from_dict({"content": "x"}).id).version == 4
    assert UserMessage("x", id="").id == ""  # an explicit id is kept as given


def test_every_message_is_a_dataclass_with_one_serializer() -> None:
    import dataclasses

    from robotlab._record import Record

    for cls in (Message, TextMessage, ToolCallMessage, ToolResultMessage, ToolMessage, UserMessage):
        assert dataclasses.is_dataclass(cls) and issubclass(cls, Record)
        assert "to_json" not in vars(cls) and "to_dict" not in vars(cls)
