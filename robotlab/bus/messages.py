"""What travels on a message bus: :class:`RobotMessage`, and :class:`Delivery`, one subscriber's copy of it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..errors import BusError

__all__ = ["Delivery", "RobotMessage"]


@dataclass(frozen=True)
class RobotMessage:
    """An immutable message between robots (Ruby ``from`` is :attr:`sender` here).

    Attributes:
        id: The sender's own message counter (not unique across senders).
        sender: The sending robot's name, which is also the channel a reply goes to.
        content: The payload: text or a dict.
        in_reply_to: The :attr:`key` of the message this one answers, else ``None``.
    """

    id: int
    sender: str
    content: str | dict[str, Any]
    in_reply_to: str | None = None

    @classmethod
    def build(
        cls, *, id: int, sender: str, content: str | dict[str, Any], in_reply_to: str | None = None
    ) -> RobotMessage:
        """Build a message (keyword arguments only; ``in_reply_to`` defaults to ``None``)."""
        return cls(id=id, sender=sender, content=content, in_reply_to=in_reply_to)

    def to_dict(self) -> dict[str, Any]:
        """All four fields, ``in_reply_to`` included when ``None``, under RobotLab's names (``from``)."""
        return {"id": self.id, "from": self.sender, "content": self.content, "in_reply_to": self.in_reply_to}

    @property
    def key(self) -> str:
        """``"sender:id"``: the identity that replies name in :attr:`in_reply_to`."""
        return f"{self.sender}:{self.id}"

    @property
    def is_reply(self) -> bool:
        """Whether this message answers another one."""
        return self.in_reply_to is not None


class Delivery:
    """One subscriber's copy of a published message. Settle it once: :meth:`ack` or :meth:`nack`.

    :attr:`status` is ``"pending"`` until then, ``"acked"`` or ``"nacked"`` after. A delivery
    has no deadline: one that its handler never settles stays pending.
    """

    def __init__(self, message: object, *, channel: str, subscriber_id: int) -> None:
        self.message: Any = message  # what the publisher sent, as it sent it
        self.channel = channel
        self.subscriber_id = subscriber_id
        self._status = "pending"
        self._lock = threading.Lock()

    @property
    def status(self) -> str:
        """``"pending"``, ``"acked"`` or ``"nacked"``."""
        return self._status

    @property
    def is_pending(self) -> bool:
        """Whether neither :meth:`ack` nor :meth:`nack` has been called."""
        return self._status == "pending"

    @property
    def is_acked(self) -> bool:
        """Whether the subscriber accepted the message."""
        return self._status == "acked"

    @property
    def is_nacked(self) -> bool:
        """Whether the subscriber rejected the message (or its handler failed)."""
        return self._status == "nacked"

    def ack(self) -> None:
        """Accept the message. Raises :class:`BusError` when already settled."""
        self._settle("acked")

    def nack(self) -> None:
        """Reject the message. Raises :class:`BusError` when already settled."""
        self._settle("nacked")

    def _settle(self, status: str, *, strict: bool = True) -> None:
        with self._lock:
            if self._status != "pending":
                if strict:
                    raise BusError(f"Delivery already resolved as {self._status}")
                return
            self._status = status

    def _nack_if_pending(self) -> None:
        self._settle("nacked", strict=False)

    def __repr__(self) -> str:
        return f"<Delivery channel={self.channel!r} subscriber={self.subscriber_id} status={self._status!r}>"
