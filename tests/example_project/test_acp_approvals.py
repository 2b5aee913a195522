"""Issue 27 (4): through the official ``acp-sdk`` client, the ``orders`` robot's change awaits approval with the
proposed call, ``approve`` runs it and ``deny`` leaves the row (the example project under daphne, the demo model)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.example_project.test_acp import _client, _text, acp_site

acp_models = pytest.importorskip("acp_sdk.models")

__all__ = ["acp_site"]  # the fixture, used by name

pytestmark = pytest.mark.slow


def _status(db: Path, number: str) -> str:
    with sqlite3.connect(db) as connection:
        return str(connection.execute("SELECT status FROM orders_order WHERE number = ?", (number,)).fetchone()[0])


def _resume(answer: str) -> Any:
    return acp_models.MessageAwaitResume(message=acp_models.Message(
        role="user", parts=[acp_models.MessagePart(content=answer)]))


def test_a_change_awaits_approval_and_approve_or_deny_decides_it(acp_site: tuple[str, str, Path]) -> None:
    async def main() -> tuple[Any, Any, Any, Any]:
        async with _client(acp_site) as client:
            asked = await client.run_sync("Change order 2 to shipped", agent="orders")
            approved = await client.run_resume_sync(_resume("approve"), run_id=asked.run_id)
            again = await client.run_sync("Change order 1 to cancelled", agent="orders")
            denied = await client.run_resume_sync(_resume("deny"), run_id=again.run_id)
            return asked, approved, again, denied

    db = acp_site[2]
    assert _status(db, "A-1002") == "placed"
    asked, approved, again, denied = asyncio.run(main())
    assert asked.status.value == "awaiting"
    text_part, call_part = asked.await_request.message.parts
    assert text_part.content.startswith('Approve update_order {"id": 2, "status": "shipped"}?')
    call = json.loads(call_part.content)
    assert call_part.name == "approval" and call["tool"] == "update_order"
    assert call["details"]["changes"] == [{"field": "status", "before": "placed", "after": "shipped"}]
    assert approved.status.value == "completed" and '"status": "shipped"' in _text(approved)
    assert _status(db, "A-1002") == "shipped"
    assert again.status.value == "awaiting"
    assert denied.status.value == "completed"
    assert _text(denied) == "I asked my tools: update_order returned denied by demo."
    assert _status(db, "A-1001") == "placed"
