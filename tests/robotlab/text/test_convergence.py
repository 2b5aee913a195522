from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robotlab.errors import DependencyError
from robotlab.text import analysis as text_analysis
from robotlab.text.convergence import Convergence

RAILS_A = """Ruby on Rails is a web application framework written in Ruby.
It follows the MVC pattern and emphasizes convention over configuration.
ActiveRecord handles database interactions through an ORM layer."""

RAILS_B = """Rails is a popular Ruby framework for building web applications.
It uses the Model-View-Controller architecture and ActiveRecord for database access.
Convention over configuration reduces the need for boilerplate code."""

OCEAN = """The Pacific Ocean is the largest and deepest ocean on Earth.
It covers more than thirty percent of the planet surface area.
Numerous island chains and coral reefs are found throughout its waters."""

# Two verifiers reaching the same conclusion in their own words.
VERDICT_A = (
    "The root cause is a race condition in the cache invalidation code: two workers update the cache "
    "entry concurrently, so stale values survive. Adding a lock around the update fixes the bug."
)
VERDICT_B = (
    "The bug is caused by a race condition: concurrent workers update the same cache entry during "
    "invalidation, which leaves stale values behind. Fixing it requires a lock around the cache update."
)
DEPLOY_A = (
    "The deployment failed because the database migration timed out; rerunning the migration with a "
    "longer timeout should fix the deployment."
)
DEPLOY_B = (
    "Deployment failure was caused by a migration timeout in the database. Rerun the migration with a "
    "longer timeout to fix it."
)
PHOTOSYNTHESIS = (
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen inside the "
    "chloroplasts of green plants."
)


@pytest.fixture
def missing_stemmer(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise ImportError("No module named 'snowballstemmer'")

    monkeypatch.setattr(text_analysis, "load_classifier", fail)


def test_constants() -> None:
    assert Convergence.DEFAULT_THRESHOLD == 0.85
    assert Convergence.MIN_TEXT_LENGTH == 30


# --- similarity ----------------------------------------------------------------------------------


def test_short_texts_score_zero() -> None:
    assert Convergence.similarity("", "") == 0.0
    assert Convergence.similarity("hi", "hello") == 0.0
    assert Convergence.similarity(RAILS_A, "short") == 0.0
    assert Convergence.similarity("short", RAILS_A) == 0.0
    assert Convergence.similarity(None, RAILS_A) == 0.0


def test_two_short_identical_texts_score_zero_not_one() -> None:
    text = "The answer is 42, clearly."  # 26 characters
    assert Convergence.similarity(text, text) == 0.0


def test_length_is_measured_after_stripping() -> None:
    padded = "   " + "x" * 27 + "\n\t  "  # 34 characters, 27 after stripping
    assert Convergence.similarity(padded, padded) == 0.0
    exactly = "converging robots agree easily"  # 30 characters
    assert len(exactly) == 30
    assert Convergence.similarity(exactly, f"  {exactly}  ") == pytest.approx(1.0)


def test_identical_texts_score_one() -> None:
    assert Convergence.similarity(RAILS_A, RAILS_A) == pytest.approx(1.0)
    assert Convergence.similarity(VERDICT_A, VERDICT_A) == pytest.approx(1.0)


@pytest.mark.parametrize(("a", "b"), [(VERDICT_A, VERDICT_B), (DEPLOY_A, DEPLOY_B)])
def test_same_conclusion_worded_differently_scores_high(a: str, b: str) -> None:
    score = Convergence.similarity(a, b)
    assert 0.6 <= score < 0.9


def test_same_topic_scores_in_the_middle() -> None:
    assert 0.3 <= Convergence.similarity(RAILS_A, RAILS_B) < 0.6


@pytest.mark.parametrize(
    ("a", "b"), [(RAILS_A, OCEAN), (VERDICT_A, PHOTOSYNTHESIS), (VERDICT_A, OCEAN), (DEPLOY_A, RAILS_B)]
)
def test_unrelated_texts_score_low(a: str, b: str) -> None:
    assert Convergence.similarity(a, b) < 0.15


def test_scores_are_ordered_by_relatedness() -> None:
    identical = Convergence.similarity(VERDICT_A, VERDICT_A)
    same_conclusion = Convergence.similarity(VERDICT_A, VERDICT_B)
    same_topic = Convergence.similarity(RAILS_A, RAILS_B)
    unrelated = Convergence.similarity(RAILS_A, OCEAN)
    assert identical > same_conclusion > same_topic > unrelated


def test_similarity_is_symmetric() -> None:
    assert Convergence.similarity(RAILS_A, RAILS_B) == Convergence.similarity(RAILS_B, RAILS_A)


@given(st.text(max_size=200), st.text(max_size=200))
def test_similarity_is_a_symmetric_score_in_the_unit_interval(a: str, b: str) -> None:
    score = Convergence.similarity(a, b)
    assert 0.0 <= score <= 1.0
    assert score == Convergence.similarity(b, a)


def test_similarity_requires_the_stemmer(missing_stemmer: None) -> None:
    with pytest.raises(DependencyError, match="snowballstemmer"):
        Convergence.similarity(RAILS_A, RAILS_B)


def test_short_texts_need_no_stemmer(missing_stemmer: None) -> None:
    assert Convergence.similarity("hi", "hello") == 0.0
    assert Convergence.is_detected("hi", "hello") is False


# --- is_detected ---------------------------------------------------------------------------------


def test_is_detected_with_the_default_threshold() -> None:
    assert Convergence.is_detected(RAILS_A, RAILS_A) is True
    assert Convergence.is_detected(VERDICT_A, VERDICT_B) is False  # ~0.79 < 0.85
    assert Convergence.is_detected(RAILS_A, OCEAN) is False


def test_is_detected_with_a_custom_threshold() -> None:
    assert Convergence.is_detected(VERDICT_A, VERDICT_B, threshold=0.75) is True
    assert Convergence.is_detected(VERDICT_A, VERDICT_B, 0.75) is True
    assert Convergence.is_detected(RAILS_A, OCEAN, threshold=0.5) is False


def test_is_detected_compares_with_greater_or_equal() -> None:
    score = Convergence.similarity(VERDICT_A, VERDICT_B)
    assert Convergence.is_detected(VERDICT_A, VERDICT_B, threshold=score) is True
    assert Convergence.is_detected("hi", "there", threshold=0.0) is True  # 0.0 >= 0.0
    assert Convergence.is_detected("identical and long enough text", "identical and long enough text", 1.0)


@pytest.mark.parametrize(
    ("threshold", "shown"),
    [
        (1.5, "1.5"),
        (-0.1, "-0.1"),
        (2, "2"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        ("0.5", "0.5"),
        (None, "None"),
        (True, "True"),
    ],
)
def test_is_detected_rejects_thresholds_outside_the_unit_interval(threshold: object, shown: str) -> None:
    with pytest.raises(ValueError) as caught:
        Convergence.is_detected("a", "b", threshold=threshold)  # type: ignore[arg-type]
    assert str(caught.value) == f"threshold must be in [0.0, 1.0], got {shown}"


def test_is_detected_accepts_the_bounds() -> None:
    assert Convergence.is_detected("a", "b", threshold=0) is True
    assert Convergence.is_detected("a", "b", threshold=1) is False


def test_is_detected_requires_the_stemmer(missing_stemmer: None) -> None:
    with pytest.raises(DependencyError):
        Convergence.is_detected(RAILS_A, RAILS_B)
