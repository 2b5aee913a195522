"""Every consumer of events handles every kind: the page's script, ACP, A2A, AG-UI, the network rewriter, the
coalescer, the public-error filter.

Each consumer's table is made by :func:`robotlab.streaming.handling_table` from a function that ends with
``assert_never``: mypy fails when a kind is added and a consumer does not name it, and so do these tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from robotlab.streaming import (
    ALL_EVENTS,
    Dropped,
    Handled,
    OtherEvent,
    UnhandledEventKindError,
    consumers,
    handled_kinds,
    handling_table,
    parse_event,
)
from robotlab.testing import text
from robotlab_django import services
from robotlab_django.a2a.events import A2A_EVENTS
from robotlab_django.acp.events import ACP_EVENTS
from robotlab_django.agui.events import AGUI_EVENTS
from robotlab_django.chat.page_events import PAGE_EVENTS
from robotlab_django.models import RunEvent
from robotlab_django.networks.task_events import REWRITES
from robotlab_django.runs.user_errors import PUBLIC_EVENTS
from robotlab_django.streaming.coalescer import COALESCING
from robotlab_django.streaming.streamed_text import STREAMED

SCRIPT = Path(__file__).resolve().parents[3] / "robotlab_django" / "static" / "robotlab" / "robotlab.js"

#: The tables of the consumers, by the name each registered.
TABLES: dict[str, Mapping[str, Handled[Any] | Dropped]] = {
    "chat page": PAGE_EVENTS, "ACP stream": ACP_EVENTS, "A2A stream": A2A_EVENTS, "AG-UI stream": AGUI_EVENTS,
    "network task rewriter": REWRITES, "coalescer": COALESCING, "public-error filter": PUBLIC_EVENTS}


def switch_cases(script: str) -> list[str]:
    """The ``case`` labels of the page script's one ``switch (event.kind)``, in order."""
    assert script.count("switch (event.kind)") == 1, "the page handles kinds in one switch"
    start = script.index("switch (event.kind)")
    body = script[start:script.index("default:", start)]
    return re.findall(r'case\s+"([^"]+)"\s*:', body)


def test_the_page_script_switch_handles_exactly_the_kinds_its_table_handles() -> None:
    cases = switch_cases(SCRIPT.read_text(encoding="utf-8"))
    assert len(cases) == len(set(cases)), "a kind has two cases"
    assert set(cases) == handled_kinds(PAGE_EVENTS), (
        "robotlab.js's switch and robotlab_django/chat/page_events.py disagree: "
        f"cases without a Handled entry {sorted(set(cases) - handled_kinds(PAGE_EVENTS))}, "
        f"Handled kinds without a case {sorted(handled_kinds(PAGE_EVENTS) - set(cases))}")


def test_the_switch_parser_reads_the_cases() -> None:
    script = 'x; switch (event.kind) {\n  case "a.b":\n  case "c":  // note\n    break;\n  default:\n}\n case "d":'
    assert switch_cases(script) == ["a.b", "c"]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_consumer_names_every_kind_and_says_why_it_drops_one(name: str) -> None:
    table = TABLES[name]
    assert list(table) == list(ALL_EVENTS)
    for kind, handling in table.items():
        assert isinstance(handling, Handled | Dropped), (name, kind)
        assert (handling.reason if isinstance(handling, Dropped) else handling.how).strip(), (name, kind)
    assert name in consumers()


def test_a_kind_added_without_handling_fails_every_consumer() -> None:
    registered = consumers()
    assert set(TABLES) <= set(registered)
    for name, decide in registered.items():
        with pytest.raises(UnhandledEventKindError, match=f"{re.escape(name)} does not handle 'test.added'"):
            handling_table(name, decide, kinds=(*ALL_EVENTS, "test.added"))


def test_the_protocols_bridge_only_what_streamed_text_makes_text_of() -> None:
    for table in (ACP_EVENTS, A2A_EVENTS):
        bridged = {kind: handling.action for kind, handling in table.items() if isinstance(handling, Handled)}
        assert bridged == STREAMED  # today both bridge the text and the attempts, and drop the rest with a reason


@pytest.mark.django_db
def test_the_stored_events_of_a_network_turn_read_back_as_typed_events_key_for_key(
        scripted_llm: Callable[..., Any]) -> None:
    scripted_llm(text("billing"), text("Your refund is on its way."))
    row = services.run_robot("s1", "helpdesk", "I was charged twice")
    stored = [event.to_dict() for event in RunEvent.objects.filter(result_id=row.pk).order_by("pk")]
    assert {"run.started", "step.started", "text.delta", "step.completed", "run.completed"} <= {
        event["kind"] for event in stored}
    for wire in stored:
        typed = parse_event(wire)
        assert not isinstance(typed, OtherEvent) and typed.extra == {}, wire
        assert json.dumps(typed.to_dict()) == json.dumps(wire)
