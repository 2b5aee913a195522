"""A network's ``token_budget`` / ``cost_budget``: one budget over every task's run (issue 15, point 6)."""

from __future__ import annotations

import asyncio

import pytest

from robotlab import build
from robotlab.budget import SharedBudget
from robotlab.errors import BudgetExceeded
from robotlab.llm import LLMRequest, LLMResponse, TextCallback
from robotlab.network import create_network
from robotlab.testing.fake import FakeLLM, text


def _chain(config: dict[str, object], *, usage: tuple[int, int] = (20, 20), cost: float = 0.0) -> tuple[object, ...]:
    llms = [FakeLLM(default=text("ok", usage=usage, cost=cost)) for _ in range(3)]
    network = create_network(name="chain", config=config)
    network.task("a", build(name="a", llm=llms[0]))
    network.task("b", build(name="b", llm=llms[1]), depends_on="a")
    network.task("c", build(name="c", llm=llms[2]), depends_on="b")
    return network, llms


def test_network_token_budget_stops_the_run_with_the_seeds_message() -> None:
    network, llms = _chain({"token_budget": 50})
    with pytest.raises(BudgetExceeded) as info:
        network.run("go")
    # a uses 40 (under 50), b's call takes the network to 80: the seed's post-call message
    assert str(info.value) == "Token budget exceeded: 80 tokens used, budget is 50"
    assert info.value.scope == "network 'chain'"
    assert info.value.dimension == "tokens"
    assert len(llms[2].requests) == 0  # c never calls the model
    assert network.budget is not None
    assert network.budget.ledger.consumed["tokens"] == 80
    assert network.budget.ledger.remaining("tokens") == 0


def test_a_spent_network_budget_refuses_the_next_run_before_any_call() -> None:
    network, llms = _chain({"token_budget": 50})
    with pytest.raises(BudgetExceeded):
        network.run("go")
    calls = [len(llm.requests) for llm in llms]
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for tokens: 80 > 50$"):
        network.run("again")
    assert [len(llm.requests) for llm in llms] == calls


def test_network_cost_budget() -> None:
    network, llms = _chain({"cost_budget": 0.05}, cost=0.03)
    with pytest.raises(BudgetExceeded, match=r"^Cost budget exceeded: \$0\.060000 used, budget is \$0\.050000$"):
        network.run("go")
    assert len(llms[2].requests) == 0


def test_within_budget_every_task_runs() -> None:
    network, llms = _chain({"token_budget": 500})
    result = network.run("go")
    assert result.value.reply == "ok"
    assert network.budget is not None and network.budget.ledger.consumed["tokens"] == 120


def test_no_budget_no_shared_budget() -> None:
    network, _ = _chain({})
    assert network.budget is None
    assert SharedBudget.of("x", token_budget=None, cost_budget=None) is None


def test_nested_network_counts_against_the_outer_budget() -> None:
    inner, _ = _chain({})
    outer = create_network(name="outer", config={"token_budget": 50})
    outer.task("inner", inner)
    with pytest.raises(BudgetExceeded, match=r"^Token budget exceeded: 80 tokens used, budget is 50$"):
        outer.run("go")


class _SlowLLM(FakeLLM):
    """A FakeLLM whose every answer takes a moment, so the branches' calls are in flight together."""

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        await asyncio.sleep(0.02)
        return await super().complete(request, on_text=on_text)


def _fan_out(branches: int, budget: int, **robot: object) -> tuple[object, FakeLLM]:
    llm = _SlowLLM(default=text("ok", usage=(40, 40)))
    network = create_network(name="fan", config={"token_budget": budget})
    network.task("plan", build(name="plan", llm=llm, **robot))
    names = [f"branch_{n}" for n in range(1, branches + 1)]
    for name in names:
        network.task(name, build(name=name, llm=llm, **robot), depends_on="plan")
    network.task("reduce", build(name="reduce", llm=llm, **robot), depends_on=names)
    return network, llm


@pytest.mark.parametrize("max_tokens", [50, None])
def test_parallel_branches_see_each_others_calls_in_flight(max_tokens: int | None) -> None:
    """Budget 300, calls of 80 tokens: branches running at once reserve per call and wait for each other, so the
    budget is passed by less than one call; before, every branch was let through (80 + 8 * 80 = 720)."""
    network, llm = _fan_out(8, 300, **({"max_tokens": max_tokens} if max_tokens else {}))
    with pytest.raises(BudgetExceeded) as info:
        network.run("go")
    assert info.value.scope == "network 'fan'"
    assert network.budget is not None
    consumed = network.budget.ledger.consumed["tokens"]
    assert consumed == 80 * len(llm.requests)  # every call paid is counted
    assert 300 < consumed <= 300 + 80  # the call that filled it, no more
    assert network.budget.ledger.reserved["tokens"] == 0
