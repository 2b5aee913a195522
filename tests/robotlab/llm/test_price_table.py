"""Prices without litellm: its price table read as data agrees with litellm, and a first run never imports it.

The comparisons import litellm in this process (as litellm's own answer is the reference); whatever must not
import litellm runs in a fresh interpreter, where ``sys.modules`` tells.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

from robotlab.llm import load_litellm, price_table, pricing
from robotlab.llm.providers import PROVIDERS

#: Names no row holds: self-hosted models, a local server's bare name, an unknown organisation's.
UNKNOWN = ["hosted_vllm/llama-3.1-8b", "lm_studio/qwen2.5", "gpustack/x", "llama3.1", "my-model",
           "my-org/local-llama", "hosted_vllm/gpt-4o-mini", "GPT-4o-mini", "openai/llama3"]


def fresh(code: str, timeout: float = 120) -> Any:
    """Run ``code`` in a new interpreter; its last printed line, read as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def names_to_check() -> set[str]:
    """Every row of the direct client's providers under each name a robot may give it, and the unknown ones."""
    names = set(UNKNOWN)
    for key, row in price_table._load().rows.items():
        provider = row.get("litellm_provider")
        if provider not in PROVIDERS:
            continue
        bare = key.removeprefix(f"{provider}/")
        names.update({key, key.lower(), key.upper(), f"{provider}/{bare}", f"{provider}/{bare.upper()}",
                      f"hosted_vllm/{bare}", f"{key}-2099-01-01", f"my-org/{bare}"})
    return names


def test_every_price_the_table_gives_is_litellms_and_the_rest_litellm_prices_or_cannot() -> None:
    litellm = load_litellm()
    litellm.suppress_debug_info = True
    known = 0
    for name in sorted(names_to_check()):
        ours = price_table.known_prices(name)
        theirs = pricing.litellm_prices(name)
        if ours is not None:
            known += 1
            assert math.isclose(ours.input, theirs[0], rel_tol=1e-9), (name, ours, theirs)
            assert math.isclose(ours.output, theirs[1], rel_tol=1e-9), (name, ours, theirs)
        elif not price_table.litellm_can_price(name):
            assert theirs == (0.0, 0.0), name  # litellm has no price for it either
    assert known > 300  # OpenAI's, Groq's, xAI's, Together's... rows, under their names


def test_finding_and_reading_the_table_imports_no_litellm() -> None:
    code = ("import json, sys; from robotlab.llm import price_table as t; path = t.table_path(); t.load(); "
            "p = t.known_prices('openai/gpt-4o-mini'); "
            "print(json.dumps([str(path), 'litellm' in sys.modules, p.input, p.output, p.max_input_tokens, "
            f"[t.known_prices(n) is None and not t.litellm_can_price(n) for n in {UNKNOWN!r}]]))")
    path, imported, per_input, per_output, window, unknown = fresh(code)
    assert path.endswith("litellm/" + price_table.TABLE_FILE)
    assert imported is False
    assert (per_input, per_output, window) == (0.15e-6, 0.6e-6, 128000)
    assert all(unknown)


FIRST_RUN = """
import json, sys
import robotlab
from robotlab.testing.server import FakeLLMServer, reply

with FakeLLMServer(reply("Hello", usage=(1234, 567)), reply("Again", usage=(10, 5))) as server:
    robotlab.configure(llm={"api_base": server.base_url, "api_key": "sk-fake"})
    robot = robotlab.build(name="first", model="openai/gpt-4o-mini")
    first = robot.run("Hi")
    second = robot.run("Again")
    print(json.dumps([first.transport, first.cost, "litellm" in sys.modules,
                      sorted(m for m in sys.modules if m.startswith("litellm"))[:3]]))
"""


def test_a_fresh_processs_first_run_imports_no_litellm_and_costs_what_litellm_says() -> None:
    transport, cost, imported, loaded = fresh(FIRST_RUN)
    assert transport == "direct"
    assert imported is False, loaded
    litellm = load_litellm()
    prompt, completion = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1234,
                                                completion_tokens=567)
    assert cost == pytest.approx(prompt + completion, rel=1e-9)


def test_once_litellm_is_imported_its_registered_prices_win() -> None:
    code = ("import json, sys; from robotlab.llm import pricing; "
            "before = pricing.price_per_token('openai/gpt-4o-mini'); imported_before = 'litellm' in sys.modules; "
            "litellm = pricing.load_litellm(); "
            "litellm.register_model({'gpt-4o-mini': {'input_cost_per_token': 1e-3, 'output_cost_per_token': 2e-3, "
            "'litellm_provider': 'openai', 'mode': 'chat'}}); "
            "print(json.dumps([imported_before, before, pricing.price_per_token('openai/gpt-4o-mini')]))")
    imported_before, before, after = fresh(code)
    assert imported_before is False
    assert before == [0.15e-6, 0.6e-6]
    assert after == pytest.approx([1e-3, 2e-3])


def test_asking_litellm_for_its_fresh_map_prices_through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "false")
    assert pricing.litellm_decides()
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    assert pricing.litellm_decides() is ("litellm" in sys.modules)
