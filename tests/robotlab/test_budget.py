from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robotlab.budget import Ledger
from robotlab.errors import BudgetExceeded, RobotLabError
from robotlab.text_analysis import format_number as _ruby_number


def test_constructor_defaults() -> None:
    ledger = Ledger()
    assert ledger.limits == {}
    assert ledger.consumed == {}
    assert dict(ledger.reserved) == {}


def test_limits_and_consumed() -> None:
    ledger = Ledger(limits={"tokens": 10_000, "cost": 0.5}, consumed={"tokens": 3_412, "cost": 0.081})
    assert ledger.limits == {"tokens": 10_000, "cost": 0.5}
    assert ledger.consumed == {"tokens": 3_412, "cost": 0.081}


def test_untouched_dimension_reads_zero_without_being_added() -> None:
    ledger = Ledger(limits={"tokens": 10})
    assert ledger.consumed["tokens"] == 0
    assert ledger.consumed["anything"] == 0
    assert ledger.reserved["tokens"] == 0
    assert ledger.consumed == {}


def test_constructor_copies_its_arguments() -> None:
    limits = {"tokens": 10}
    consumed = {"tokens": 1}
    ledger = Ledger(limits=limits, consumed=consumed)
    ledger.reconcile("tokens", 0, 5)
    assert consumed == {"tokens": 1}
    assert ledger.consumed["tokens"] == 6


def test_reserve_message_uses_committed_plus_amount() -> None:
    ledger = Ledger(limits={"tokens": 10_000}, consumed={"tokens": 3_412})
    with pytest.raises(BudgetExceeded) as info:
        ledger.reserve("tokens", 7_176)
    assert str(info.value) == "budget exceeded for tokens: 10588 > 10000"
    assert isinstance(info.value, RobotLabError)
    assert ledger.reserved["tokens"] == 0  # a failed reservation records nothing


def test_reserve_counts_earlier_reservations() -> None:
    ledger = Ledger(limits={"tokens": 10_000}, consumed={"tokens": 3_412})
    ledger.reserve("tokens", 6_588)
    assert ledger.reserved["tokens"] == 6_588
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for tokens: 10001 > 10000$"):
        ledger.reserve("tokens", 1)


def test_exactly_at_the_limit_passes() -> None:
    ledger = Ledger(limits={"tokens": 100})
    ledger.reserve("tokens", 100)
    assert ledger.remaining("tokens") == 0
    ledger.reserve("tokens", 0)  # still exactly at the limit
    ledger.reconcile("tokens", 100, 100)
    ledger.reserve("tokens", ledger.remaining("tokens"))  # consumed == limit: reserving 0 passes
    with pytest.raises(BudgetExceeded, match="101 > 100"):
        ledger.reserve("tokens", 1)


def test_overspent_budget_raises_on_the_next_reservation() -> None:
    ledger = Ledger(limits={"tokens": 100})
    ledger.reserve("tokens", 100)
    ledger.reconcile("tokens", 100, 150)  # the call used more than was reserved
    assert ledger.remaining("tokens") == 0
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for tokens: 150 > 100$"):
        ledger.reserve("tokens", ledger.remaining("tokens"))


def test_cost_message_renders_floats_like_ruby() -> None:
    ledger = Ledger(limits={"cost": 0.5}, consumed={"cost": 0.45})
    with pytest.raises(BudgetExceeded) as info:
        ledger.reserve("cost", 0.1)
    assert str(info.value) == "budget exceeded for cost: 0.55 > 0.5"


def test_float_sums_are_printed_in_full() -> None:
    ledger = Ledger(limits={"cost": 0.3}, consumed={"cost": 0.1})
    with pytest.raises(BudgetExceeded) as info:
        ledger.reserve("cost", 0.2)
    assert str(info.value) == "budget exceeded for cost: 0.30000000000000004 > 0.3"


def test_mixed_int_and_float() -> None:
    ledger = Ledger(limits={"tokens": 10.0})  # untouched dimensions start at the integer 0, as in Ruby
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for tokens: 11 > 10.0$"):
        ledger.reserve("tokens", 11)
    ledger = Ledger(limits={"cost": 1})
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for cost: 1.5 > 1$"):
        ledger.reserve("cost", 1.5)
    ledger = Ledger(limits={"tokens": 10}, consumed={"tokens": 2.0})
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for tokens: 11.0 > 10$"):
        ledger.reserve("tokens", 9)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10588, "10588"),
        (0, "0"),
        (-3, "-3"),
        (0.5, "0.5"),
        (100.0, "100.0"),
        (0.0001, "0.0001"),
        (1e-05, "1.0e-05"),
        (1.5e-07, "1.5e-07"),
        (1e15, "1000000000000000.0"),
        (1e16, "1.0e+16"),
        (1.25e20, "1.25e+20"),
        (1e100, "1.0e+100"),
        (-0.0, "-0.0"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_ruby_number_rendering(value: float, text: str) -> None:
    assert _ruby_number(value) == text


def test_unlimited_dimension_never_raises_and_records_nothing() -> None:
    ledger = Ledger(limits={"tokens": 10})
    ledger.reserve("cost", 1e12)
    assert ledger.reserved["cost"] == 0
    assert ledger.remaining("cost") == math.inf
    assert ledger.remaining("unmetered") == math.inf
    assert Ledger().remaining("tokens") == math.inf


def test_a_limit_of_none_is_unlimited_and_zero_is_a_limit() -> None:
    ledger = Ledger(limits={"tokens": None, "cost": 0})  # type: ignore[dict-item]
    ledger.reserve("tokens", 5)
    assert ledger.remaining("tokens") == math.inf
    ledger.reserve("cost", 0)
    assert ledger.remaining("cost") == 0
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for cost: 0.01 > 0$"):
        ledger.reserve("cost", 0.01)


def test_reconcile_swaps_the_reservation_for_the_actual() -> None:
    ledger = Ledger(limits={"tokens": 10_000})
    reserved = ledger.remaining("tokens")
    ledger.reserve("tokens", reserved)
    assert ledger.remaining("tokens") == 0
    ledger.reconcile("tokens", reserved, 3_412)
    assert ledger.reserved["tokens"] == 0
    assert ledger.consumed["tokens"] == 3_412
    assert ledger.remaining("tokens") == 6_588


def test_reconcile_floors_the_reservation_pool_at_zero() -> None:
    ledger = Ledger(limits={"tokens": 100})
    ledger.reserve("tokens", 10)
    ledger.reconcile("tokens", 50, 5)
    assert ledger.reserved["tokens"] == 0
    assert ledger.consumed["tokens"] == 5
    assert ledger.remaining("tokens") == 95


def test_reconcile_works_on_unlimited_dimensions() -> None:
    ledger = Ledger()
    ledger.reconcile("cost", 0, 0.25)
    ledger.reconcile("cost", 0, 0.25)
    assert ledger.consumed["cost"] == 0.5
    assert ledger.remaining("cost") == math.inf


def test_release_drops_a_reservation_without_consumption() -> None:
    ledger = Ledger(limits={"tokens": 100})
    ledger.reserve("tokens", 60)
    ledger.release("tokens", 40)
    assert ledger.reserved["tokens"] == 20
    assert ledger.consumed["tokens"] == 0
    ledger.release("tokens", 1_000)
    assert ledger.reserved["tokens"] == 0
    assert ledger.remaining("tokens") == 100


def test_remaining_is_floored_at_zero() -> None:
    ledger = Ledger(limits={"tokens": 100}, consumed={"tokens": 250})
    assert ledger.remaining("tokens") == 0


def test_reserved_is_read_only() -> None:
    ledger = Ledger(limits={"tokens": 10})
    with pytest.raises(TypeError):
        ledger.reserved["tokens"] = 5  # type: ignore[index]


def test_threads_never_overcommit() -> None:
    ledger = Ledger(limits={"tokens": 1_000})
    granted: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(100):
            try:
                ledger.reserve("tokens", 7)
            except BudgetExceeded:
                continue
            with lock:
                granted.append(7)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the thread did not finish within 60 s"
    assert sum(granted) == ledger.reserved["tokens"] == 994  # 142 reservations of 7
    assert ledger.remaining("tokens") == 6


@given(st.lists(st.tuples(st.sampled_from(["reserve", "reconcile", "release"]), st.integers(0, 500),
                          st.integers(0, 500)), max_size=40))
def test_invariants_under_any_sequence(operations: list[tuple[str, int, int]]) -> None:
    ledger = Ledger(limits={"tokens": 1_000})
    for operation, amount, actual in operations:
        before = (ledger.consumed["tokens"], ledger.reserved["tokens"])
        if operation == "reserve":
            if before[0] + before[1] + amount > 1_000:
                with pytest.raises(BudgetExceeded):
                    ledger.reserve("tokens", amount)
                assert (ledger.consumed["tokens"], ledger.reserved["tokens"]) == before
            else:
                ledger.reserve("tokens", amount)
                assert ledger.reserved["tokens"] == before[1] + amount
        elif operation == "reconcile":
            ledger.reconcile("tokens", amount, actual)
            assert ledger.consumed["tokens"] == before[0] + actual
            assert ledger.reserved["tokens"] == max(0, before[1] - amount)
        else:
            ledger.release("tokens", amount)
            assert ledger.reserved["tokens"] == max(0, before[1] - amount)
        assert ledger.reserved["tokens"] >= 0
        assert ledger.remaining("tokens") == max(1_000 - ledger.consumed["tokens"] - ledger.reserved["tokens"], 0)
