"""ResponseCache (memory.cache): robotlab.memory.response_cache."""

from __future__ import annotations

import pytest

from robotlab.memory import ResponseCache

# ---- ResponseCache ------------------------------------------------------------------------


def test_response_cache() -> None:
    cache = ResponseCache(max_entries=2)
    assert cache.fetch("q1", lambda: "a1") == "a1"
    assert cache.fetch("q1", lambda: pytest.fail("recomputed")) == "a1"
    assert cache.set("q2", "a2") == "a2"
    assert cache.get("q1") == "a1"  # q1 is now the most recent
    cache.set("q3", "a3")
    assert "q2" not in cache and "q1" in cache and len(cache) == 2
    assert cache.get("missing", "dflt") == "dflt"
    assert cache.delete("q1") == "a1" and cache.delete("q1") is None
    cache.clear()
    assert len(cache) == 0
