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

import uuid
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from ._record import Record, string_keys, symbol_name

__all__ = [
    "coerce_message",
    "Message",
    "TextMessage",
    "ToolCallMessage",
    "ToolMessage",
    "ToolResultMessage",
    "UserMessage",
]


@dataclass(kw_only=True)
class Message(Record):
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

    _wire: ClassVar[tuple[str, ...]] = ("type", "role", "content", "stop_reason")
    _compact: ClassVar[bool] = True

    type: str
    role: str
    content: Any
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        kind, role, stop_reason = symbol_name(self.type), symbol_name(self.role), symbol_name(self.stop_reason)
        if str(kind) not in self.VALID_TYPES:
            raise ValueError(f"Invalid message type: {kind}. Must be one of: {', '.join(self.VALID_TYPES)}")
        if str(role) not in self.VALID_ROLES:
            raise ValueError(f"Invalid role: {role}. Must be one of: {', '.join(self.VALID_ROLES)}")
        if stop_reason is not None and str(stop_reason) not in self.VALID_STOP_REASONS:
            raise ValueError(
                f"Invalid stop_reason: {stop_reason}. Must be one of: {', '.join(self.VALID_STOP_REASONS)}"
            )
        self.type = str(kind)
        self.role = str(role)
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
        data = string_keys(data)
        kind = symbol_name(data.get("type"))
        kind = "text" if kind is None else str(kind)
        return _BY_TYPE.get(kind, Message)._from_keys({**data, "type": kind})


@dataclass(kw_only=True)
class TextMessage(Message):
    """Text from the system, the user or the assistant.

    ``TextMessage(role="assistant", content="Hi there!", stop_reason="stop")``
    """

    type: str = field(default="text", init=False)


@dataclass
class ToolMessage(Record):
    """One tool invocation: its call ``id``, the tool ``name`` and the ``input`` arguments.

    Not a :class:`Message` (it has no role); :class:`ToolCallMessage` and
    :class:`ToolResultMessage` carry it. ``input=None`` becomes ``{}``; ``from_dict`` accepts
    ``arguments`` as an alias of ``input``. The dict form is ``{"type": "tool", "id", "name",
    "input"}`` (not compacted).
    """

    type: ClassVar[str] = "tool"
    _wire: ClassVar[tuple[str, ...]] = ("type", "id", "name", "input")
    _aliases: ClassVar[Mapping[str, str]] = {"arguments": "input"}

    _: KW_ONLY
    id: Any
    name: Any
    input: Any = None

    def __post_init__(self) -> None:
        if self.input is None:
            self.input = {}


def _tool(value: object) -> ToolMessage:
    if isinstance(value, ToolMessage):
        return value
    if isinstance(value, Mapping):
        return ToolMessage.from_dict(value)
    raise TypeError("Invalid tool: must be ToolMessage or Hash")


@dataclass(kw_only=True)
class ToolCallMessage(Message):
    """The model's request to run one or more tools; ``content`` is always ``None``.

    The dict form is ``{type, role, tools: [...], stop_reason}``, not compacted.

    Args:
        role: usually ``"assistant"``.
        tools: :class:`ToolMessage` objects or dicts (converted with ``ToolMessage.from_dict``);
            ``None`` is an empty list.
        stop_reason: ``"tool"`` by default (``None`` also means ``"tool"``).

    Raises:
        TypeError: a tool is neither a :class:`ToolMessage` nor a dict
            (``"Invalid tool: must be ToolMessage or Hash"``).
    """

    _wire: ClassVar[tuple[str, ...]] = ("type", "role", "tools", "stop_reason")
    _compact: ClassVar[bool] = False

    type: str = field(default="tool_call", init=False)
    content: Any = field(default=None, init=False)
    tools: list[ToolMessage]
    stop_reason: str | None = "tool"

    def __post_init__(self) -> None:
        self.tools = [_tool(item) for item in (self.tools or [])]
        if self.stop_reason is None:
            self.stop_reason = "tool"
        super().__post_init__()


@dataclass(kw_only=True)
class ToolResultMessage(Message):
    """The result of running a tool; the role is ``"tool_result"``.

    ``content`` is conventionally ``{"data": ...}`` on success or ``{"error": ...}`` on failure.
    The dict form is ``{type, role, tool: tool.to_dict(), content, stop_reason}``, not compacted.

    Args:
        tool: the :class:`ToolMessage` (or its dict) that was run.
        content: the result.
        stop_reason: ``"tool"`` by default (``None`` also means ``"tool"``).

    Raises:
        TypeError: ``tool`` is neither a :class:`ToolMessage` nor a dict
            (``"Invalid tool: must be ToolMessage or Hash"``).
    """

    _wire: ClassVar[tuple[str, ...]] = ("type", "role", "tool", "content", "stop_reason")
    _compact: ClassVar[bool] = False

    type: str = field(default="tool_result", init=False)
    role: str = field(default="tool_result", init=False)
    tool: ToolMessage
    stop_reason: str | None = "tool"

    def __post_init__(self) -> None:
        self.tool = _tool(self.tool)
        if self.stop_reason is None:
            self.stop_reason = "tool"
        super().__post_init__()

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


_BY_TYPE: dict[str, type[Message]] = {
    "text": TextMessage,
    "tool_call": ToolCallMessage,
    "tool_result": ToolResultMessage,
}


@dataclass
class UserMessage(Record):
    """The user's input with its context: session, extra system prompt and metadata.

    ``content`` is converted with ``str()`` (``None`` becomes ``""``, as Ruby's ``nil.to_s``);
    ``metadata`` defaults to ``{}``, ``id`` to a new UUID4 string and ``created_at`` is the
    current time (an aware UTC ``datetime``). The dict form is ``{content, session_id,
    system_prompt, metadata, id, created_at}`` without ``None`` values, ``created_at`` in ISO 8601
    with seconds precision.

    ``UserMessage("What is the weather?", session_id="thread_123", system_prompt="Respond in Spanish")``
    """

    _wire: ClassVar[tuple[str, ...]] = ("content", "session_id", "system_prompt", "metadata", "id", "created_at")
    _compact: ClassVar[bool] = True

    content: str
    _: KW_ONLY
    session_id: Any = None
    system_prompt: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.content = "" if self.content is None else str(self.content)
        self.metadata = {} if self.metadata is None else dict(self.metadata)
        if self.id is None:  # from_dict without an id
            self.id = str(uuid.uuid4())
        self.created_at = datetime.now(UTC)

    def to_message(self) -> TextMessage:
        """The content as a user :class:`TextMessage`."""
        return TextMessage(role="user", content=self.content)

    def __str__(self) -> str:
        return self.content

    @classmethod
    def coerce(cls, value: object) -> UserMessage:
        """Normalize any input to a :class:`UserMessage` (Ruby ``UserMessage.from``).

        A ``UserMessage`` is returned as is; a ``str`` becomes the content; a dict gives
        ``content``, ``session_id``, ``system_prompt``, ``metadata`` and ``id`` (a new
        ``created_at``), as :meth:`from_dict`; a :class:`TextMessage` gives its content; anything
        else goes through ``str()``.
        """
        if isinstance(value, UserMessage):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        if isinstance(value, TextMessage):
            return cls(value.content)
        return cls(str(value))


def coerce_message(item: object) -> Message:
    """``item`` as a :class:`Message`: a message as it is, a dict through :meth:`Message.from_dict`."""
    if isinstance(item, Message):
        return item
    if isinstance(item, Mapping):
        return Message.from_dict(item)
    raise TypeError("Invalid message: must be Message or Hash")
