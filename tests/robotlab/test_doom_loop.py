from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from robotlab.doom_loop import DoomLoopDetector

ADVICE = ("You appear to be stuck in a loop. Try a fundamentally different approach, use a different tool, "
          "or ask for clarification.")


def detector_with(names: list[str], threshold: int = 3) -> DoomLoopDetector:
    detector = DoomLoopDetector(threshold=threshold)
    for name in names:
        detector.track(name)
    return detector


def test_constants_and_defaults() -> None:
    assert DoomLoopDetector.DEFAULT_THRESHOLD == 3
    assert DoomLoopDetector.MAX_PERIOD == 10
    detector = DoomLoopDetector()
    assert detector.threshold == 3
    assert detector.sequence == []


@pytest.mark.parametrize("threshold", [0, -1, 1.5, "3", True])
def test_threshold_must_be_a_positive_integer(threshold: object) -> None:
    with pytest.raises(ValueError, match="threshold must be a positive integer"):
        DoomLoopDetector(threshold=threshold)  # type: ignore[arg-type]


def test_track_returns_the_sequence_and_coerces_with_str() -> None:
    detector = DoomLoopDetector()
    assert detector.track("search") == ["search"]
    result = detector.track(42)
    assert result == ["search", "42"]
    assert result is detector.sequence


def test_consecutive_loop() -> None:
    detector = DoomLoopDetector(threshold=3)
    detector.track("search")
    detector.track("search")
    assert not detector.is_doom_loop
    detector.track("search")
    assert detector.is_doom_loop
    assert detector.warning_message == (
        "Tool 'search' has been called 3+ times consecutively with no progress. " + ADVICE)


def test_consecutive_loop_only_at_the_tail() -> None:
    assert not detector_with(["a", "a", "a", "b"]).is_doom_loop
    assert detector_with(["b", "c", "a", "a", "a"]).is_doom_loop


def test_fewer_calls_than_the_threshold_is_never_a_loop() -> None:
    assert not DoomLoopDetector().is_doom_loop
    assert not detector_with(["a", "a"]).is_doom_loop
    assert not detector_with(["a"] * 4, threshold=5).is_doom_loop
    assert detector_with(["a"] * 5, threshold=5).is_doom_loop


def test_threshold_of_one_flags_every_call() -> None:
    assert detector_with(["a"], threshold=1).is_doom_loop
    assert detector_with(["a", "b"], threshold=1).is_doom_loop


def test_cyclic_loop() -> None:
    detector = detector_with(["A", "B", "C"] * 3)
    assert detector.is_doom_loop
    assert detector.warning_message == "Tool call pattern [A → B → C] has repeated 3+ times. " + ADVICE


def test_cyclic_loop_with_a_prefix_and_period_two() -> None:
    detector = detector_with(["x", "y", "search", "fetch", "search", "fetch", "search", "fetch"])
    assert detector.is_doom_loop
    assert detector.warning_message == "Tool call pattern [search → fetch] has repeated 3+ times. " + ADVICE


def test_cyclic_pattern_renders_the_last_period_entries() -> None:
    # A, B, C x 3 then A: the tail is B, C, A repeated three times, shown as the last three names
    detector = detector_with(["A", "B", "C"] * 3 + ["A"])
    assert detector.is_doom_loop
    assert detector.warning_message == "Tool call pattern [B → C → A] has repeated 3+ times. " + ADVICE
    assert not detector_with(["A", "B", "C"] * 3 + ["B"]).is_doom_loop


def test_two_repetitions_of_a_cycle_are_not_enough() -> None:
    assert not detector_with(["A", "B", "C"] * 2).is_doom_loop
    assert detector_with(["A", "B", "C"] * 2, threshold=2).is_doom_loop


def test_period_is_capped_at_max_period() -> None:
    ten = [f"t{i}" for i in range(10)]
    assert detector_with(ten * 3).is_doom_loop
    eleven = [f"t{i}" for i in range(11)]
    assert not detector_with(eleven * 3).is_doom_loop


def test_period_is_capped_by_length_over_threshold() -> None:
    # five calls with threshold 2 allow periods up to 2 only
    assert detector_with(["x", "a", "b", "a", "b"], threshold=2).is_doom_loop
    assert not detector_with(["a", "b", "c", "a", "b"], threshold=2).is_doom_loop


def test_threshold_in_the_message() -> None:
    detector = detector_with(["search"] * 5, threshold=5)
    assert detector.warning_message.startswith("Tool 'search' has been called 5+ times consecutively")
    detector = detector_with(["a", "b"] * 4, threshold=4)
    assert detector.warning_message.startswith("Tool call pattern [a → b] has repeated 4+ times.")


def test_warning_message_is_empty_for_an_empty_sequence() -> None:
    assert DoomLoopDetector().warning_message == ""


def test_warning_message_without_a_loop_names_the_last_tool() -> None:
    detector = detector_with(["a", "b", "c"])
    assert not detector.is_doom_loop
    assert detector.warning_message == "Tool 'c' has been called 3+ times consecutively with no progress. " + ADVICE


def test_reset_clears_the_sequence() -> None:
    detector = detector_with(["a", "a", "a"])
    assert detector.reset() == []
    assert detector.sequence == []
    assert not detector.is_doom_loop
    assert detector.warning_message == ""
    detector.track("a")
    assert detector.sequence == ["a"]


def test_repr() -> None:
    assert repr(detector_with(["a"])) == "<DoomLoopDetector threshold=3 sequence=['a']>"


# -- properties ------------------------------------------------------------------------------
names = st.sampled_from(["a", "b", "c", "d", "e"])


def oracle(seq: list[str], threshold: int) -> bool:
    """An independent statement of the rule: the last period*threshold calls are periodic with that period."""
    for period in range(1, min(DoomLoopDetector.MAX_PERIOD, len(seq) // threshold) + 1):
        window = seq[len(seq) - period * threshold:]
        if all(window[i] == window[i + period] for i in range(len(window) - period)):
            return True
    return False


@given(prefix=st.lists(names, max_size=8), pattern=st.lists(names, min_size=1, max_size=10),
       threshold=st.integers(1, 5))
def test_pattern_repeated_threshold_times_is_detected(prefix: list[str], pattern: list[str], threshold: int) -> None:
    detector = detector_with(prefix + pattern * threshold, threshold=threshold)
    assert detector.is_doom_loop
    message = detector.warning_message
    endings = (f"{threshold}+ times. " + ADVICE, f"{threshold}+ times consecutively with no progress. " + ADVICE)
    assert message.endswith(endings)


@given(pattern=st.lists(names, min_size=2, max_size=10, unique=True), threshold=st.integers(2, 5))
def test_cyclic_message_shows_a_primitive_pattern(pattern: list[str], threshold: int) -> None:
    detector = detector_with(pattern * threshold, threshold=threshold)
    assert detector.warning_message == (
        f"Tool call pattern [{' → '.join(pattern)}] has repeated {threshold}+ times. " + ADVICE)


@given(seq=st.lists(names, max_size=40), threshold=st.integers(1, 5))
def test_matches_the_oracle(seq: list[str], threshold: int) -> None:
    assert detector_with(seq, threshold=threshold).is_doom_loop == oracle(seq, threshold)


@given(seq=st.lists(st.integers(0, 1_000), max_size=30, unique=True), threshold=st.integers(2, 5))
def test_distinct_names_never_loop(seq: list[int], threshold: int) -> None:
    assume(seq)
    assert not detector_with([str(n) for n in seq], threshold=threshold).is_doom_loop
