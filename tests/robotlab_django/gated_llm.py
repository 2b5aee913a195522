"""A scripted model whose first answer waits for the test: a reply that is still running while the test acts."""

from __future__ import annotations

import asyncio
import threading

from robotlab.llm import LLMRequest, LLMResponse, TextCallback
from robotlab.testing import FakeLLM
from robotlab.testing.fake import Step

__all__ = ["GatedLLM"]

#: Seconds the first answer waits for the gate at most (a test that fails leaves no thread behind for long).
GATE_TIMEOUT = 20.0


class GatedLLM:
    """Answers from ``steps`` as :class:`FakeLLM` does; its first call streams ``partial``, then waits.

    ``entered`` is set once the first call is waiting (the reply is running, its ``partial`` text sent); the call
    goes on once the test sets ``gate``. A run cancelled meanwhile stops there.
    """

    def __init__(self, *steps: Step | str, partial: str = "") -> None:
        self.fake = FakeLLM(steps)
        self.partial = partial
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.calls = 0

    @property
    def requests(self) -> list[LLMRequest]:
        """The requests answered so far (the first one once the gate opened)."""
        return self.fake.requests

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """The next scripted answer; the first one after the gate opens."""
        self.calls += 1
        if self.calls == 1:
            if on_text is not None and self.partial:
                on_text(self.partial)
            self.entered.set()
            await asyncio.to_thread(self.gate.wait, GATE_TIMEOUT)
        return await self.fake.complete(request, on_text=on_text)
