"""A network's ``token_budget`` / ``cost_budget``: one budget over every task's run (issue 15, point 6)."""

from __future__ import annotations

import pytest

from robotlab import build
from robotlab.budget import SharedBudget
from robotlab.errors import BudgetExceeded
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
