"""Detection of a model stuck calling the same tool, or the same cycle of tools, again and again.

Every run tracks the name of each tool it calls. When the tail of that sequence is one name
repeated ``threshold`` times (``A, A, A``) or a pattern of 2 to 10 names repeated
``threshold`` times (``A, B, C, A, B, C, A, B, C``), the run appends
:attr:`DoomLoopDetector.warning_message` to the tool result, so the model reads it and can
change course, and then calls :meth:`~DoomLoopDetector.reset`. Detection never raises::

    detector = DoomLoopDetector(threshold=3)
    for name in ["search", "search", "search"]:
        detector.track(name)
    detector.is_doom_loop       # True
    detector.warning_message    # "Tool 'search' has been called 3+ times consecutively ..."
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["DoomLoopDetector"]

_ADVICE = ("You appear to be stuck in a loop. Try a fundamentally different approach, use a different tool, "
           "or ask for clarification.")


class DoomLoopDetector:
    """Tracks tool names and spots consecutive or cyclic repetition at the end of the sequence.

    Args:
        threshold: How many repetitions make a loop (default :attr:`DEFAULT_THRESHOLD`).
    """

    DEFAULT_THRESHOLD: ClassVar[int] = 3
    """Repetitions before a loop is declared."""

    MAX_PERIOD: ClassVar[int] = 10
    """The longest cyclic pattern searched for."""

    def __init__(self, *, threshold: int = DEFAULT_THRESHOLD) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValueError(f"threshold must be a positive integer, got {threshold!r}")
        self.threshold = threshold
        self._sequence: list[str] = []

    @property
    def sequence(self) -> list[str]:
        """Every tracked tool name, in order."""
        return self._sequence

    def track(self, tool_name: object) -> list[str]:
        """Record one tool call (the name is taken through ``str``); returns :attr:`sequence`."""
        self._sequence.append(tool_name if isinstance(tool_name, str) else str(tool_name))
        return self._sequence

    def reset(self) -> list[str]:
        """Forget every tracked call; returns the new, empty :attr:`sequence`."""
        self._sequence = []
        return self._sequence

    def _period(self) -> int | None:
        """The period of the loop at the end of the sequence: 1 when consecutive, else 2..10, or ``None``."""
        seq = self._sequence
        threshold = self.threshold
        if len(set(seq[-threshold:])) == 1:
            return 1
        for period in range(2, min(self.MAX_PERIOD, len(seq) // threshold) + 1):
            chunk = seq[-threshold * period:]
            if chunk == chunk[:period] * threshold:
                return period
        return None

    @property
    def is_doom_loop(self) -> bool:
        """Whether the sequence ends in a loop; always ``False`` before ``threshold`` calls."""
        if len(self._sequence) < self.threshold:
            return False
        return self._period() is not None

    @property
    def warning_message(self) -> str:
        """The self-correction text for the model; ``""`` when nothing has been tracked.

        A consecutive loop names the tool, a cyclic one shows its pattern as ``A → B → C``.
        With no loop at the end of the sequence (the message is meant to be read only when
        :attr:`is_doom_loop` is true) it names the last tool, as RobotLab does.
        """
        seq = self._sequence
        if not seq:
            return ""
        period = self._period() or 1
        times = self.threshold
        if period == 1:
            head = f"Tool '{seq[-1]}' has been called {times}+ times consecutively with no progress. "
        else:
            head = f"Tool call pattern [{' → '.join(seq[-period:])}] has repeated {times}+ times. "
        return head + _ADVICE

    def __repr__(self) -> str:
        return f"<DoomLoopDetector threshold={self.threshold} sequence={self._sequence!r}>"
