"""The guard that keeps tests from calling real LLM providers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .. import llm

__all__ = ["allow_real_requests", "block_real_requests"]


def block_real_requests(blocked: bool = True) -> None:
    """Make requests to non-loopback providers raise :class:`~robotlab.llm.RealRequestBlocked`."""
    llm.ALLOW_REAL_REQUESTS = not blocked


@contextmanager
def allow_real_requests() -> Iterator[None]:
    """Allow real provider requests inside the ``with`` block."""
    previous = llm.ALLOW_REAL_REQUESTS
    llm.ALLOW_REAL_REQUESTS = True
    try:
        yield
    finally:
        llm.ALLOW_REAL_REQUESTS = previous
