"""RobotResult: what one robot run returns, and how it is persisted.

``export()`` is the persistence form (no debug fields), ``to_dict()`` adds the debug fields
``prompt``, ``history`` and ``raw``, ``to_json()`` is ``export()`` as JSON and
``RobotResult.from_dict`` rebuilds a result from either. ``checksum`` identifies the content
of a result (its messages and its creation second) for de-duplication.
"""

from __future__ import annotations

import calendar
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from ._record import Record, dumps
from .messages import Message, ToolResultMessage
from .messages import coerce_message as _message

__all__ = ["RobotResult"]

#: The keys of :meth:`RobotResult.export`, in order.
_EXPORTED = (
    "robot_name", "delegated_by", "output", "tool_calls", "created_at", "id", "checksum", "stop_reason",
    "duration", "input_tokens", "output_tokens", "cost", "model", "transport",
)


def _items(values: Any) -> list[Any]:
    """Ruby's ``Array(x)`` for our inputs: ``None`` is empty, a single message or dict is wrapped."""
    if values is None:
        return []
    if isinstance(values, Message | Mapping):
        return [values]
    return list(values)


def _tool_result(item: object) -> Message:
    if isinstance(item, ToolResultMessage):
        return item
    if isinstance(item, Mapping):  # "tool_result" dicts become ToolResultMessage through the dispatch
        return Message.from_dict(item)
    raise TypeError("Invalid tool result: must be ToolResultMessage or Hash")


def _moment(value: datetime | str | None) -> datetime:
    """A creation time: ``None`` is now; an ISO 8601 string is parsed; a naive time is taken as UTC."""
    if value is None:
        return datetime.now(UTC)
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _messages(items: Iterable[Any] | None) -> list[Any] | None:
    return None if items is None else [_message(item) for item in items]


@dataclass(init=False, eq=False, repr=False)
class RobotResult(Record):
    """The result of one robot run (Ruby ``RobotLab::RobotResult``).

    ``export()`` is the persistence form (no debug fields), ``to_dict()`` adds the debug fields
    ``prompt``, ``history`` and ``raw``, ``to_json()`` is ``export()`` as JSON and ``from_dict``
    rebuilds a result from either. Results compare by identity, as before. The constructor is
    written out (not generated) because it accepts more than the fields hold: dicts for messages,
    a string for ``created_at``, ``None`` for the counts.

    Args:
        robot_name: the name of the robot that ran.
        output: the output messages, :class:`~robotlab.messages.Message` objects or their dicts
            (a single message or dict, or ``None``, is accepted too).
        tool_calls: tool results, :class:`~robotlab.messages.ToolResultMessage` objects or dicts
            (a dict of type ``"tool_result"`` becomes a ``ToolResultMessage``, any other dict goes
            through ``Message.from_dict``).
        created_at: an aware ``datetime`` or an ISO 8601 string; defaults to now (UTC). A naive
            time is taken as UTC.
        id: defaults to a new UUID4 string.
        prompt, history, raw: debug fields (the prompt and history messages, the raw response).
        stop_reason: why the model stopped, if known.
        input_tokens, output_tokens: token usage of the run (``None`` counts as 0).
        cost: the run's cost in USD (a Python addition; ``None`` counts as 0.0).
        model: the model that answered (a Python addition).
        transport: ``"direct"`` or ``"litellm"``, the transport that answered (a Python addition;
            ``None`` for test doubles, and then left out of ``export()``).
        duration: elapsed seconds.
        delegated_by: the name of the robot that delegated this run.

    ``duration``, ``delegated_by``, ``prompt``, ``history`` and ``raw`` are meant to be set after
    construction (delegation sets the first two).

    Raises:
        TypeError: an output item is neither a Message nor a dict (``"Invalid message: must be
            Message or Hash"``), or a tool call is neither a ToolResultMessage nor a dict
            (``"Invalid tool result: must be ToolResultMessage or Hash"``).
        ValueError: a message dict is invalid (see :class:`~robotlab.messages.Message`).
    """

    _wire: ClassVar[tuple[str, ...]] = (*_EXPORTED, "prompt", "history", "raw")
    _compact: ClassVar[bool] = True
    _omit_zero: ClassVar[frozenset[str]] = frozenset({"input_tokens", "output_tokens", "cost"})
    _not_restored: ClassVar[frozenset[str]] = frozenset({"duration", "delegated_by"})

    robot_name: str | None
    output: list[Message]
    tool_calls: list[Message]
    created_at: datetime
    id: str
    prompt: list[Any] | None
    history: list[Any] | None
    raw: Any
    stop_reason: str | None
    input_tokens: int
    output_tokens: int
    cost: float
    model: str | None
    transport: str | None
    duration: float | None
    delegated_by: str | None

    def __init__(
        self,
        *,
        robot_name: str | None,
        output: Iterable[Message | Mapping[str, Any]] | Message | Mapping[str, Any] | None = (),
        tool_calls: Iterable[Message | Mapping[str, Any]] | Message | Mapping[str, Any] | None = (),
        created_at: datetime | str | None = None,
        id: str | None = None,
        prompt: list[Any] | None = None,
        history: list[Any] | None = None,
        raw: object = None,
        stop_reason: str | None = None,
        input_tokens: int | None = 0,
        output_tokens: int | None = 0,
        cost: float | None = 0.0,
        model: str | None = None,
        transport: str | None = None,
        duration: float | None = None,
        delegated_by: str | None = None,
    ) -> None:
        self.robot_name = robot_name
        self.output = [_message(item) for item in _items(output)]
        self.tool_calls = [_tool_result(item) for item in _items(tool_calls)]
        self.created_at = _moment(created_at)
        self.id = str(uuid.uuid4()) if id is None else id
        self.prompt = prompt
        self.history = history
        self.raw = raw
        self.stop_reason = stop_reason
        self.input_tokens = int(input_tokens or 0)
        self.output_tokens = int(output_tokens or 0)
        self.cost = float(cost or 0.0)
        self.model = model
        self.transport = transport
        self.duration = duration
        self.delegated_by = delegated_by

    @property
    def last_text_content(self) -> Any:
        """The content of the last text message in ``output``, or ``None`` if there is none."""
        for message in reversed(self.output):
            if message.is_text:
                return message.content
        return None

    @property
    def reply(self) -> Any:
        """Alias of :attr:`last_text_content`: the robot's answer."""
        return self.last_text_content

    @property
    def has_tool_calls(self) -> bool:
        """``True`` when ``output`` holds a tool-call message or ``tool_calls`` is not empty."""
        return any(message.is_tool_call for message in self.output) or bool(self.tool_calls)

    @property
    def is_stopped(self) -> bool:
        """``True`` when the run ended naturally rather than on a tool call.

        The last output message stopped (``stop_reason == "stop"``), or there are no tool calls
        and the last message has no stop reason. ``False`` when ``output`` is empty.
        """
        if not self.output:
            return False
        last = self.output[-1]
        return last.is_stopped or (not self.has_tool_calls and last.stop_reason is None)

    @property
    def checksum(self) -> str:
        """SHA-256 hex digest of the output, the tool calls and the creation second.

        The digest is taken over compact JSON (as Ruby's ``to_json``: no spaces, UTF-8) of
        ``{"output": [...], "tool_calls": [...], "created_at": <epoch seconds, int>}``. A lone surrogate in the
        text (a model can send one) is digested as its code unit (``surrogatepass``) instead of failing.
        """
        content = {
            "output": [message.to_dict() for message in self.output],
            "tool_calls": [message.to_dict() for message in self.tool_calls],
            "created_at": calendar.timegm(self.created_at.utctimetuple()),
        }
        return hashlib.sha256(dumps(content).encode("utf-8", "surrogatepass")).hexdigest()

    def export(self) -> dict[str, Any]:
        """The persistence form, without debug fields and without ``None`` values.

        Keys in order: ``robot_name``, ``delegated_by``, ``output``, ``tool_calls``,
        ``created_at`` (ISO 8601, seconds), ``id``, ``checksum``, ``stop_reason``, ``duration``,
        ``input_tokens`` and ``output_tokens`` (only when positive), then the Python additions
        ``cost`` (only when positive) and ``model``.
        """
        return self._dict_of(_EXPORTED)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`export` plus the debug fields ``prompt``, ``history`` and ``raw`` (``None`` dropped)."""
        return super().to_dict()

    def to_json(self) -> str:
        """:meth:`export` as compact JSON (debug fields excluded)."""
        return dumps(self.export())

    @classmethod
    def from_dict(cls, data: Mapping[Any, Any]) -> RobotResult:
        """Rebuild a result from :meth:`export` or :meth:`to_dict` output (Ruby ``from_hash``).

        Restores ``robot_name``, ``output``, ``tool_calls``, ``created_at``, ``id``, ``prompt``,
        ``history``, ``raw``, ``stop_reason``, the token counts, ``cost`` and ``model``.
        ``duration`` and ``delegated_by`` are **not** restored (they stay ``None``), as in
        RobotLab; set them again if needed. ``checksum`` is recomputed, not read.
        """
        result = super().from_dict(data)
        result.prompt, result.history = _messages(result.prompt), _messages(result.history)
        return result

    def __repr__(self) -> str:
        return (
            f"RobotResult(robot_name={self.robot_name!r}, id={self.id!r}, reply={self.reply!r}, "
            f"stop_reason={self.stop_reason!r})"
        )
