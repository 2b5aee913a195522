"""The messages of a conversation: text, tool calls, tool results and the user's input.

``TextMessage``, ``ToolCallMessage`` and ``ToolResultMessage`` derive from :class:`Message`;
``ToolMessage`` (one tool invocation) and ``UserMessage`` (the user's input plus metadata) are
separate classes, as in RobotLab. ``type``, ``role`` and ``stop_reason`` are stored as strings;
an ``Enum`` member is accepted and stored as its value (Ruby accepts symbols the same way).

Every message serializes with ``to_dict``/``to_json`` and comes back with ``Message.from_dict``::

    >>> Message.from_dict({"type": "text", "role": "user", "content": "Hello"}).to_dict()
    {'type': 'text', 'role': 'user', 'content': 'Hello'}
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar

__all__ = [
    "coerce_message",
    "Message",
    "TextMessage",
    "ToolCallMessage",
    "ToolMessage",
    "ToolResultMessage",
    "UserMessage",
]


def _dumps(value: Any) -> str:
    """Compact JSON, like Ruby's ``to_json``: no spaces, UTF-8 kept, unknown objects as ``str()``."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _name(value: Any) -> Any:
    """An ``Enum`` member becomes its value (a Ruby symbol becomes its name); anything else is kept."""
    return value.value if isinstance(value, Enum) else value


def _keys(data: Mapping[Any, Any]) -> dict[str, Any]:
    """A copy of ``data`` with string keys (Ruby's ``transform_keys(&:to_sym)``)."""
    return {str(_name(key)): value for key, value in data.items()}


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """Drop ``None`` values only (Ruby's ``Hash#compact``); ``False``, ``0`` and ``""`` stay."""
    return {key: value for key, value in data.items() if value is not None}


def _iso8601(moment: datetime) -> str:
    """Ruby's ``Time#iso8601``: seconds precision with the UTC offset."""
    return moment.isoformat(timespec="seconds")


class Message:
    """Base class of the conversation messages (Ruby ``RobotLab::Message``).

    Args:
        type: one of :attr:`VALID_TYPES`.
        role: one of :attr:`VALID_ROLES`.
        content: the text, a tool result dict, or ``None``.
        stop_reason: ``None`` or one of :attr:`VALID_STOP_REASONS`.

    Raises:
        ValueError: ``type``, ``role`` or ``stop_reason`` is not a valid value, with the
            seed's wording, e.g. ``"Invalid role: bot. Must be one of: system, user, assistant,
            tool_result"``.
    """

    VALID_TYPES: ClassVar[tuple[str, ...]] = ("text", "tool_call", "tool_result")
    VALID_ROLES: ClassVar[tuple[str, ...]] = ("system", "user", "assistant", "tool_result")
    VALID_STOP_REASONS: ClassVar[tuple[str, ...]] = ("tool", "stop")

    type: str
    role: str
    content: Any
    stop_reason: str | None

    def __init__(self, *, type: Any, role: Any, content: Any, stop_reason: Any = None) -> None:
        type, role, stop_reason = _name(type), _name(role), _name(stop_reason)
        if str(type) not in self.VALID_TYPES:
            raise ValueError(f"Invalid message type: {type}. Must be one of: {', '.join(self.VALID_TYPES)}")
        if str(role) not in self.VALID_ROLES:
            raise ValueError(f"Invalid role: {role}. Must be one of: {', '.join(self.VALID_ROLES)}")
        if stop_reason is not None and str(stop_reason) not in self.VALID_STOP_REASONS:
            raise ValueError(
                f"Invalid stop_reason: {stop_reason}. Must be one of: {', '.join(self.VALID_STOP_REASONS)}"
            )
        self.type = str(type)
        self.role = str(role)
        self.content = content
        self.stop_reason = None if stop_reason is None else str(stop_reason)

    @property
    def is_text(self) -> bool:
        """``True`` for a text message."""
        return self.type == "text"

    @property
    def is_tool_call(self) -> bool:
        """``True`` for a tool-call message."""
        return self.type == "tool_call"

    @property
    def is_tool_result(self) -> bool:
        """``True`` for a tool-result message."""
        return self.type == "tool_result"

    @property
    def is_system(self) -> bool:
        """``True`` when the role is ``"system"``."""
        return self.role == "system"

    @property
    def is_user(self) -> bool:
        """``True`` when the role is ``"user"``."""
        return self.role == "user"

    @property
    def is_assistant(self) -> bool:
        """``True`` when the role is ``"assistant"``."""
        return self.role == "assistant"

    @property
    def is_stopped(self) -> bool:
        """``True`` when the model stopped on its own (``stop_reason == "stop"``)."""
        return self.stop_reason == "stop"

    @property
    def is_tool_stop(self) -> bool:
        """``True`` when the model stopped to call a tool (``stop_reason == "tool"``)."""
        return self.stop_reason == "tool"

    def to_dict(self) -> dict[str, Any]:
        """``{type, role, content, stop_reason}`` without the ``None`` values."""
        return _compact(
            {"type": self.type, "role": self.role, "content": self.content, "stop_reason": self.stop_reason}
        )

    def to_json(self) -> str:
        """``to_dict()`` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[Any, Any]) -> Message:
        """Rebuild a message from ``to_dict`` output (Ruby ``Message.from_hash``).

        Keys may be strings or ``Enum`` members. ``type`` defaults to ``"text"`` and picks the
        subclass: ``"text"`` -> :class:`TextMessage`, ``"tool_call"`` -> :class:`ToolCallMessage`,
        ``"tool_result"`` -> :class:`ToolResultMessage`; any other type goes to :class:`Message`
        itself, whose validation rejects it.

        Raises:
            ValueError: an invalid type, role or stop_reason.
            TypeError: a tool that is neither a :class:`ToolMessage` nor a dict.
        """
        data = _keys(data)
        kind = _name(data.get("type"))
        kind = "text" if kind is None else str(kind)
        if kind == "text":
            return TextMessage(
                role=data.get("role"), content=data.get("content"), stop_reason=data.get("stop_reason")
            )
        if kind == "tool_call":
            return ToolCallMessage(
                role=data.get("role"), tools=data.get("tools"), stop_reason=data.get("stop_reason")
            )
        if kind == "tool_result":
            return ToolResultMessage(
                tool=data.get("tool"), content=data.get("content"), stop_reason=data.get("stop_reason")
            )
        return Message(
            type=kind, role=data.get("role"), content=data.get("content"), stop_reason=data.get("stop_reason")
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in vars(self).items())
        return f"{type(self).__name__}({fields})"


class TextMessage(Message):
    """Text from the system, the user or the assistant.

    ``TextMessage(role="assistant", content="Hi there!", stop_reason="stop")``
    """

    def __init__(self, *, role: Any, content: Any, stop_reason: Any = None) -> None:
        super().__init__(type="text", role=role, content=content, stop_reason=stop_reason)


class ToolMessage:
    """One tool invocation: its call ``id``, the tool ``name`` and the ``input`` arguments.

    Not a :class:`Message` (it has no role); :class:`ToolCallMessage` and
    :class:`ToolResultMessage` carry it. ``input=None`` becomes ``{}``.
    """

    id: Any
    name: Any
    input: Any

    def __init__(self, *, id: Any, name: Any, input: Any = None) -> None:
        self.id = id
        self.name = name
        self.input = {} if input is None else input

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "tool", "id", "name", "input"}`` (not compacted)."""
        return {"type": "tool", "id": self.id, "name": self.name, "input": self.input}

    def to_json(self) -> str:
        """``to_dict()`` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[Any, Any]) -> ToolMessage:
        """Rebuild from a dict; ``arguments`` is accepted as an alias of ``input``."""
        data = _keys(data)
        arguments = data.get("input")
        if arguments is None:
            arguments = data.get("arguments")
        return cls(id=data.get("id"), name=data.get("name"), input=arguments)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ToolMessage(id={self.id!r}, name={self.name!r}, input={self.input!r})"


def _tool(value: Any) -> ToolMessage:
    if isinstance(value, ToolMessage):
        return value
    if isinstance(value, Mapping):
        return ToolMessage.from_dict(value)
    raise TypeError("Invalid tool: must be ToolMessage or Hash")


class ToolCallMessage(Message):
    """The model's request to run one or more tools; ``content`` is always ``None``.

    Args:
        role: usually ``"assistant"``.
        tools: :class:`ToolMessage` objects or dicts (converted with ``ToolMessage.from_dict``);
            ``None`` is an empty list.
        stop_reason: ``"tool"`` by default (``None`` also means ``"tool"``).

    Raises:
        TypeError: a tool is neither a :class:`ToolMessage` nor a dict
            (``"Invalid tool: must be ToolMessage or Hash"``).
    """

    tools: list[ToolMessage]

    def __init__(self, *, role: Any, tools: Iterable[Any] | None, stop_reason: Any = "tool") -> None:
        self.tools = [_tool(item) for item in (tools or [])]
        super().__init__(
            type="tool_call",
            role=role,
            content=None,
            stop_reason="tool" if stop_reason is None else stop_reason,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{type, role, tools: [...], stop_reason}``, not compacted."""
        return {
            "type": self.type,
            "role": self.role,
            "tools": [item.to_dict() for item in self.tools],
            "stop_reason": self.stop_reason,
        }


class ToolResultMessage(Message):
    """The result of running a tool; the role is ``"tool_result"``.

    ``content`` is conventionally ``{"data": ...}`` on success or ``{"error": ...}`` on failure.

    Args:
        tool: the :class:`ToolMessage` (or its dict) that was run.
        content: the result.
        stop_reason: ``"tool"`` by default (``None`` also means ``"tool"``).

    Raises:
        TypeError: ``tool`` is neither a :class:`ToolMessage` nor a dict
            (``"Invalid tool: must be ToolMessage or Hash"``).
    """

    tool: ToolMessage

    def __init__(self, *, tool: Any, content: Any, stop_reason: Any = "tool") -> None:
        self.tool = _tool(tool)
        super().__init__(
            type="tool_result",
            role="tool_result",
            content=content,
            stop_reason="tool" if stop_reason is None else stop_reason,
        )

    @property
    def is_success(self) -> bool:
        """``True`` when ``content`` is a dict with a ``"data"`` key."""
        return isinstance(self.content, Mapping) and "data" in self.content

    @property
    def is_error(self) -> bool:
        """``True`` when ``content`` is a dict with an ``"error"`` key."""
        return isinstance(self.content, Mapping) and "error" in self.content

    @property
    def data(self) -> Any:
        """``content["data"]`` on success, else ``None``."""
        return self.content["data"] if self.is_success else None

    @property
    def error(self) -> Any:
        """``content["error"]`` on error, else ``None``."""
        return self.content["error"] if self.is_error else None

    def to_dict(self) -> dict[str, Any]:
        """``{type, role, tool: tool.to_dict(), content, stop_reason}``, not compacted."""
        return {
            "type": self.type,
            "role": self.role,
            "tool": self.tool.to_dict(),
            "content": self.content,
            "stop_reason": self.stop_reason,
        }


class UserMessage:
    """The user's input with its context: session, extra system prompt and metadata.

    ``content`` is converted with ``str()`` (``None`` becomes ``""``, as Ruby's ``nil.to_s``);
    ``metadata`` defaults to ``{}``, ``id`` to a new UUID4 string and ``created_at`` is the
    current time (an aware UTC ``datetime``).

    ``UserMessage("What is the weather?", session_id="thread_123", system_prompt="Respond in Spanish")``
    """

    content: str
    session_id: Any
    system_prompt: str | None
    metadata: dict[str, Any]
    id: str
    created_at: datetime

    def __init__(
        self,
        content: Any,
        *,
        session_id: Any = None,
        system_prompt: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> None:
        self.content = "" if content is None else str(content)
        self.session_id = session_id
        self.system_prompt = system_prompt
        self.metadata = {} if metadata is None else dict(metadata)
        self.id = str(uuid.uuid4()) if id is None else id
        self.created_at = datetime.now(UTC)

    def to_message(self) -> TextMessage:
        """The content as a user :class:`TextMessage`."""
        return TextMessage(role="user", content=self.content)

    def __str__(self) -> str:
        return self.content

    def to_dict(self) -> dict[str, Any]:
        """``{content, session_id, system_prompt, metadata, id, created_at}`` without ``None`` values;
        ``created_at`` is ISO 8601 with seconds precision."""
        return _compact(
            {
                "content": self.content,
                "session_id": self.session_id,
                "system_prompt": self.system_prompt,
                "metadata": self.metadata,
                "id": self.id,
                "created_at": _iso8601(self.created_at),
            }
        )

    def to_json(self) -> str:
        """``to_dict()`` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def coerce(cls, value: Any) -> UserMessage:
        """Normalize any input to a :class:`UserMessage` (Ruby ``UserMessage.from``).

        A ``UserMessage`` is returned as is; a ``str`` becomes the content; a dict gives
        ``content``, ``session_id``, ``system_prompt``, ``metadata`` and ``id`` (a new
        ``created_at``); a :class:`TextMessage` gives its content; anything else goes through ``str()``.
        """
        if isinstance(value, UserMessage):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            data = _keys(value)
            return cls(
                data.get("content"),
                session_id=data.get("session_id"),
                system_prompt=data.get("system_prompt"),
                metadata=data.get("metadata"),
                id=data.get("id"),
            )
        if isinstance(value, TextMessage):
            return cls(value.content)
        return cls(str(value))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"UserMessage({self.content!r}, session_id={self.session_id!r}, "
            f"system_prompt={self.system_prompt!r}, metadata={self.metadata!r}, id={self.id!r})"
        )


def coerce_message(item: Any) -> Message:
    """``item`` as a :class:`Message`: a message as it is, a dict through :meth:`Message.from_dict`."""
    if isinstance(item, Message):
        return item
    if isinstance(item, Mapping):
        return Message.from_dict(item)
    raise TypeError("Invalid message: must be Message or Hash")
