"""Every script of the examples gallery (``examples/NN_*.py``) runs offline and prints what it should.

Each example runs in its own process with the project's interpreter, in an empty working directory, with
no provider key and no ``ROBOT_LAB_`` variable, so it answers from its scripted offline model
(``examples/_offline.py``). The files it writes go to a temporary folder given as its first argument. A
script that fails, hangs, or no longer prints its distinctive lines fails here, and so does a new example
without expectations or without a line on the gallery page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from robotlab.config import PROVIDER_KEY_VARIABLES

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("[0-9][0-9]_*.py"))
PYTHON = ROOT / ".venv" / "bin" / "python"
TIMEOUT = 120

#: Lines (substrings) each example must print offline: values computed by the library, not only canned text.
EXPECTED: dict[str, list[str]] = {
    "01_simple_robot.py": ["helper: Ruby is a dynamic", "stop reason: stop", "messages in the conversation: 4"],
    "02_tools.py": [
        "-> calculator({'expression': '(17 + 25) * 3'})",
        "<- calculator returned 126",
        "<- fortune_cookie returned 'A thrilling time is in your near future.'",
        "calculator checked by hand: 126",
    ],
    "03_network.py": ["routed to: billing", "billing_agent: I have refunded", "routed to: technical",
                      "tech_agent: Please update"],
    "04_mcp.py": [
        "tool get_current_time: Get current time",
        "convert_time 09:30 Paris -> Tokyo: ",
        "T17:30:00+09:00",
        "MCP tools: ['convert_time', 'get_current_time']",
        "get_current_time{'timezone': 'Asia/Tokyo'} -> ",
        "+09:00 (Asia/Tokyo)",
    ],
    "05_streaming.py": [
        "calling get_forecast({'city': 'Paris'})",
        'get_forecast returned {"city": "Paris", "sky": "sunny", "high_c": 24}',
        "'run.started': 1",
        "'stream.ended': 1",
        "joined == reply: True",
        "Rome will be warm and clear.",
    ],
    "06_prompt_templates.py": [
        "instructions=None (customer and order are not known yet)",
        "triage -> orders (temperature 0.3)",
        "The customer is Ada (gold member). Their latest order: A-1001, trail tent, status shipped.",
        "triage -> products (temperature 0.7)",
        "You are the product expert of Acme Outdoor.",
    ],
    "07_network_memory.py": [
        "memory: sentiment wrote 'sentiment'",
        "memory: entities wrote 'entities'",
        "memory: keywords wrote 'keywords'",
        "'findings': ['entities', 'keywords', 'sentiment']",
        "keywords: sound, battery life, case quality.",
        "synthesis: Northwind",
    ],
    "08_llm_config.py": [
        "max_tool_rounds=None",
        "max_tool_rounds=5     request_timeout=90.0",
        "max_tool_rounds=20",
        "request_timeout=45.0",
        "max_tool_rounds=12",
        "6. template front matter   {'model': 'openai/gpt-4o-mini', 'temperature': 0.4, 'max_tokens': 300}",
        "'temperature': 0.6, 'max_tokens': 300, 'max_tool_rounds': 4",
        "'model': 'anthropic/claude-sonnet-4-20250514', 'temperature': 0.1",
    ],
    "09_chaining.py": [
        "temperature: None -> 0.9",
        "tools: [] -> ['word_count']",
        "temperature: 0.9 -> 0.2",
        "Answer with a product name and a tagline as JSON.",
        "structured reply: product='Aurora X2'",
    ],
    "10_memory.py": [
        "after memory.data.tier = 'platinum': {'customer': 'Ada', 'tier': 'platinum'}",
        "pattern score:* saw score:clarity = 9 (was 7)",
        "status updated: 'reviewing' -> 'approved' by grader",
        "get('verdict', wait=5) = 'ship it'",
        "AwaitTimeout: Timeout waiting for :never_written",
        "delete('data') -> ValueError: Cannot delete reserved key: data",
        "after reset(): keys=[], data={}",
    ],
    "11_network_introspection.py": [
        "Phase 3 (parallel): intro, body",
        "Optional (activated by routing): fact_check",
        "flowchart TD",
        '"fact_check" [label="fact_check (fact_checker)", style=dashed];',
        "after add_robot: 7 robots",
        "broadcast received: {'event': 'deadline_moved', 'to': 'Friday'} from content_pipeline",
    ],
    "12_message_bus.py": [
        "[alice:1] bob (temperature 0.2)",
        "[alice:3] bob (temperature 0.6)",
        "alice approved attempt 3 of 5",
        "('alice:3', 'replied')",
    ],
    "13_spawn.py": [
        "bus before the first spawn: None",
        "spawned a new 'astronomer' on <MessageBus channels=['dispatcher', 'astronomer']>",
        "reusing the 'astronomer'",
        "specialists: ['astronomer', 'chef']; replies received: 3",
    ],
    "14_rusty_circuit.py": [
        "heckler: Boo!",
        "(comic used reinvent_style: style is now deadpan one-liners)",
        "(comic used adjust_energy: energy set to 0.9)",
        "heckler: ...",
        "scout's verdict: VERDICT:",
        "scout_notes.md (5 lines)",
    ],
    "15_memory_network_and_bus.py": [
        "revision 1: 51 words",
        "revision 2: the editor approved it",
        "linux_draft.md",
        "memory.json",
        "final_article.md",
    ],
    "16_writers_room.py": [
        "[room] writer_1: Outline is in memory; I have ch. 1.",
        "writer_2 recruited writer_3",
        "turn 2: ['writer_1', 'writer_2', 'writer_3']",
        "[memory] writer_3 wrote chapter_3",
        "complete: True after 3 turn(s); writers: 3 (1 recruited); "
        "claims: {'1': 'writer_1', '2': 'writer_2', '3': 'writer_3'}",
        "book.md",
    ],
    "17_skills.py": [
        "skills (the robot's, then the template's): ['concise', 'friendly_tone', 'safety']",
        "temperature from the friendly_tone skill: 0.6",
        "  - Answer in at most 60 words.\n  - Be warm and use the customer's name.\n"
        "  - Never reveal passwords, keys or internal URLs.\n  - Escalate anything about legal threats to a human.\n"
        "  - You answer support questions for Acme.\n  - Sign as Ada.",
        "with words=30 for that run: Answer in at most 30 words.",
        "warning: Robot 'looper': skill cycle detected at 'loop_a', skipping",
        "looper's instructions despite the cycle: 'Rule B.\\n\\nRule A.'",
    ],
    "18_django_chat.py": [
        "chat> Hello Ada! How can I help?",
        "stored: result #1, completed,",
        "stored: result #2, completed,",
        "1 tool call(s)",
        "thread 'session-ada' (robot 'chat'): 2 results in the database",
        "a robot restored from it holds 6 messages",
    ],
    "19_token_tracking.py": [
        "Compiler or interpreter?        38 in   21 out  $0.000018",
        "totals: 119 in, 43 out, about $0.000044",
        "after reset_token_totals(): 0 in, 0 out",
        "totals: 40 in, 18 out",
    ],
    "20_circuit_breaker.py": [
        "caught ToolLoopError: Circuit breaker triggered: 4 tool calls exceeded max_tool_rounds (3)",
        "retryable: False; the tool ran 3 times",
        "last history entry: Error: Circuit breaker triggered",
        "the robot still works: Hello!",
    ],
    "21_learning_loop.py": [
        "learnings now: ['Check that files are closed']",
        "learnings now: ['Check that files are closed, ideally with a with-block']",
        "LEARNINGS FROM PREVIOUS RUNS:\n- Check that files are closed, ideally with a with-block\n- Prefer pathlib",
        "rebuilt reviewer starts with 2 learning(s)",
    ],
    "22_context_compression.py": [
        "before: 10 messages",
        "after compress_history() (drop mode): 7 messages",
        "with a summarizer for the middle scores: 8 messages",
        "       user: Asked about nightly rotation.",
        "auto_compact before the run, then the new turn: 6 messages",
    ],
    "23_convergence.py": [
        "identical        1.00  converged=True",
        "same conclusion  0.94  converged=True",
        "unrelated        0.00  converged=False",
        "verifiers agree: similarity 0.94 -> reconciler skipped",
        "verifiers disagree: similarity 0.11 -> reconciler ran",
    ],
    "24_structured_delegation.py": [
        "summarizer (delegated by manager,",
        "41+13 tokens): Revenue grew 12%",
        "analyst    (delegated by manager,",
        "all resolved: True",
    ],
    "25_history_search.py": [
        "0.87 [7]      user: Can I compress the rotated log files?",
        "0.63 [1] assistant: The capital city of France is Paris, on the Seine.",
        "search_history('quantum entanglement'): 0 hit(s)",
        "'Thanks!' is too short to be indexed: True",
    ],
    "26_document_store.py": [
        "0.333 refunds: Refunds are paid back",
        "0.632 warranty: Every product",
        "best for 'SQL database': postgres",
        "after delete_document('accounts'): ['refunds', 'shipping', 'warranty']",
        "RAG answer: You will get your refund",
    ],
    "27_incident_response.py": [
        "poller groups: ['default', 'investigation', 'command']",
        "memory: db_finding written by db_scout",
        "war room <- app_scout: {'layer': 'app', 'status': 'finding reported'}",
        "commander: all findings are in",
        "findings in memory: ['app_finding', 'db_finding', 'net_finding']",
    ],
    "28_mcp_discovery.py": [
        "-> ['github']",
        "'what time is it in Tokyo?': scores {'filesystem': 0.0, 'github': 0.0, 'time': 0.436} -> ['time']",
        "no descriptions:    ['filesystem', 'github', 'time']",
        "robot connected: ['time']; failed: []",
        "its MCP tools: ['convert_time', 'get_current_time']",
    ],
    "31_launch_assessment.py": [
        "max_concurrent_robots=4",
        "started (4 running)",
        "risk finished: NOT-READY",
        "most analysts running at once: 4",
        "recommendation: GO - five of six",
    ],
    "33_stock_predictor.py": [
        "window 1: predicted 98.99-100.58, actual 99.92-103.13, mean error 1.74",
        "'ema_alpha': 0.35",
        "'ema_vol_multiplier': 2.5",
        "46 ticks, 3 windows; the tuner learned: ['window 1: Set ema_alpha = 0.35. The forecast lags the uptrend.', "
        "'window 2: Set ema_vol_multiplier = 2.5.",
    ],
    "34_agent_skills.py": [
        "missing 'description', skipping broken",
        "catalog: ['check_style']",
        "warning: ScriptTool: notes.sh is not executable, skipping",
        "  instructions: 'Run long_lines on the file first, then point out each style problem with its line number."
        "\\n\\nYou are a careful code reviewer.'\n  tools: ['long_lines']",
        "app.py: 1 line(s) over 79 characters",
        "  instructions: 'You are a careful code reviewer.'\n  tools: []",
        "after the runs: instructions='You are a careful code reviewer.', tools=[]",
    ],
    "35_hooks.py": [
        "[redact] sending: My card is [card number], please note it.",
        "[guard] delete_account{'email': 'ada@example.com'} -> Operation not permitted: delete_account",
        "[cache] hit: the model is not called",
        "[task] review (editor) finished",
        "[alert] broken failed: InferenceError: provider down",
    ],
}


def _environment(tmp_path: Path) -> dict[str, str]:
    blocked = {*PROVIDER_KEY_VARIABLES.values(), "REDIS_URL"}
    env = {k: v for k, v in os.environ.items() if k not in blocked and not k.startswith("ROBOT_LAB_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_the_gallery_is_complete() -> None:
    names = [p.name for p in EXAMPLES]
    assert len(names) >= 15
    assert sorted(EXPECTED) == names, "every example needs expectations in EXPECTED (and only examples that exist)"
    page = (ROOT / "docs" / "examples.md").read_text()
    assert [n for n in names if f"examples/{n}" not in page] == [], "docs/examples.md must list every example"


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs_offline(example: Path, tmp_path: Path) -> None:
    source = example.read_text()
    assert source.startswith('"""') and "Run it:" in source, f"{example.name} needs a docstring saying how to run it"
    work = tmp_path / "work"
    work.mkdir()
    python = str(PYTHON) if PYTHON.exists() else sys.executable
    done = subprocess.run(
        [python, str(example), str(tmp_path / "output")],
        cwd=work, env=_environment(tmp_path), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"{example.name} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    missing = [line for line in EXPECTED.get(example.name, []) if line not in done.stdout]
    assert missing == [], f"{example.name} did not print {missing}; it printed:\n{done.stdout}"
    assert "Traceback" not in done.stderr, done.stderr
