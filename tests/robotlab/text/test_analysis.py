from __future__ import annotations

import doctest
import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robotlab import text_analysis as ta
from robotlab.errors import DependencyError


@pytest.fixture
def missing_stemmer(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise ImportError("No module named 'snowballstemmer'")

    monkeypatch.setattr(ta, "load_classifier", fail)


def test_doctests() -> None:
    assert doctest.testmod(ta).failed == 0


# --- word_hash -----------------------------------------------------------------------------------


def test_word_hash_stems_counts_and_lowercases() -> None:
    assert ta.word_hash("Robots RUN; the robot runs and running robots run.") == {"robot": 3, "run": 4}


def test_word_hash_drops_stop_words_and_words_of_two_letters_or_fewer() -> None:
    assert ta.word_hash("a an is it of to do go me ox the and with you") == {}
    assert ta.word_hash("cat dog ox") == {"cat": 1, "dog": 1}


def test_word_hash_deletes_punctuation_inside_words() -> None:
    # "don't" -> "dont" (a stop word); "it's" -> "its" -> stem "it"; "e-mail" -> "email".
    assert ta.word_hash("don't it's e-mail") == {"it": 1, "email": 1}


def test_word_hash_deletes_non_ascii_characters_like_ruby() -> None:
    # Ruby's \w is ASCII-only, so "é" is removed: "café" -> "caf"; "ü" too: "über" -> "ber".
    assert ta.word_hash("café über naïve") == {"caf": 1, "ber": 1, "nave": 1}


def test_word_hash_keeps_digits_and_underscores() -> None:
    assert ta.word_hash("robot_lab 2024 v2") == {"robot_lab": 1, "2024": 1}


def test_word_hash_skip_list_is_checked_before_stemming() -> None:
    # "since" is not in the list (only the stem-like "sinc" is), so it is kept and stemmed.
    assert ta.word_hash("since sinc") == {"sinc": 1}


def test_word_hash_of_none_and_non_strings() -> None:
    assert ta.word_hash(None) == {}
    assert ta.word_hash("") == {}
    assert ta.word_hash(12345) == {"12345": 1}


def test_word_hash_with_symbols_counts_punctuation_runs_like_the_gem() -> None:
    text = "Hello, world... really?! Yes - café."
    assert ta.word_hash(text, symbols=True) == {
        "hello": 1,
        "world": 1,
        "realli": 1,
        "caf": 1,
        ",": 1,
        "...": 1,
        "?!": 1,
        "-": 1,
        "é.": 1,
    }
    assert ta.word_hash(text) == {"hello": 1, "world": 1, "realli": 1, "caf": 1}


def test_clean_word_hash_is_word_hash_without_symbols() -> None:
    text = "The quick, brown foxes jumped over the lazy dogs!"
    expected = {"quick": 1, "brown": 1, "fox": 1, "jump": 1, "over": 1, "lazi": 1, "dog": 1}
    assert ta.clean_word_hash(text) == expected
    assert ta.word_hash(text) == expected


def test_skip_words_are_the_gems_list() -> None:
    assert len(ta.CORPUS_SKIP_WORDS) == 80
    for word in ("a", "again", "cant", "itll", "sinc", "th", "url", "whether", "youll"):
        assert word in ta.CORPUS_SKIP_WORDS
    for word in ("what", "our", "was", "since"):
        assert word not in ta.CORPUS_SKIP_WORDS


# --- the stemmer ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("cats", "cat"),
        ("feed", "feed"),
        ("agreed", "agre"),
        ("plastered", "plaster"),
        ("motoring", "motor"),
        ("hopping", "hop"),
        ("falling", "fall"),
        ("hissing", "hiss"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("conditional", "condit"),
        ("generalizations", "gener"),
        ("oscillators", "oscil"),
        ("electrical", "electr"),
        ("adjustment", "adjust"),
        ("controlling", "control"),
        ("running", "run"),
        # Martin Porter's C departures, which the gem's fast-stemmer has:
        ("possibly", "possibl"),
        ("probably", "probabl"),
        ("terribly", "terribl"),
        ("technology", "technolog"),
        ("apology", "apolog"),
        ("biology", "biologi"),  # m("bio") == 0: no departure
        # Step 1b undoubles every double consonant but l, s, z:
        ("trekking", "trek"),
        ("specced", "spec"),
        ("revving", "rev"),
    ],
)
def test_stem_matches_the_c_porter_stemmer(word: str, expected: str) -> None:
    assert ta.stem(word) == expected


def test_stem_is_thread_safe() -> None:
    words = [
        f"{prefix}{suffix}"
        for prefix in ("connect", "relat", "general", "hop", "run")
        for suffix in ("ed", "ing", "ions", "ively", "ization", "s", "ness", "ful")
    ]
    expected = {word: ta.stem(word) for word in words}
    ta.stem.cache_clear()
    failures: list[str] = []

    def work() -> None:
        for _ in range(20):
            for word in words:
                if ta._porter(word) != expected[word]:
                    failures.append(word)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the thread did not finish within 60 s"
    assert failures == []


def test_require_classifier() -> None:
    ta.require_classifier()  # installed: no error


def test_require_classifier_raises_dependency_error_with_install_hint(missing_stemmer: None) -> None:
    with pytest.raises(DependencyError, match="snowballstemmer") as caught:
        ta.require_classifier()
    assert str(caught.value) == (
        "The 'snowballstemmer' package is required for text analysis features. "
        "Install it with: pip install 'snowballstemmer>=2.2'"
    )


def test_tf_cosine_similarity_requires_the_stemmer(missing_stemmer: None) -> None:
    with pytest.raises(DependencyError):
        ta.tf_cosine_similarity("hello world test", "hello world test")


# --- vectors -------------------------------------------------------------------------------------


def test_dot_uses_shared_keys_only() -> None:
    assert ta.dot({"foo": 0.5, "bar": 0.5}, {"bar": 0.5, "baz": 0.5}) == pytest.approx(0.25)
    assert ta.dot({"foo": 1.0}, {"bar": 1.0}) == 0.0
    assert ta.dot({}, {}) == 0.0
    assert isinstance(ta.dot({}, {}), float)


def test_l2_normalize() -> None:
    assert ta.l2_normalize({"a": 3.0, "b": 4.0}) == pytest.approx({"a": 0.6, "b": 0.8})
    assert ta.l2_normalize({"a": 3, "b": 4}) == pytest.approx({"a": 0.6, "b": 0.8})
    assert ta.l2_normalize({"a": 0.0}) == {}
    assert ta.l2_normalize({}) == {}


def test_cosine_similarity() -> None:
    assert ta.cosine_similarity({"a": 1.0}, {"a": 1.0}) == 1.0
    assert ta.cosine_similarity({"x": 1.0}, {"y": 1.0}) == 0.0
    assert 0.0 < ta.cosine_similarity({"x": 0.707, "y": 0.707}, {"x": 1.0}) < 1.0
    assert ta.cosine_similarity({}, {"a": 1.0}) == 0.0
    assert ta.cosine_similarity({"a": 1.0}, {}) == 0.0
    assert ta.cosine_similarity({"x": 1.0000001}, {"x": 1.0000001}) == 1.0  # capped


def test_tf_cosine_similarity_ranks_related_texts_higher() -> None:
    rails_a = "Ruby on Rails is a web framework built on top of the Ruby programming language"
    rails_b = "Rails provides a structure for web applications using the Ruby language and MVC"
    ocean = "The Pacific Ocean is the largest body of water on the surface of the Earth"
    assert ta.tf_cosine_similarity(rails_a, rails_b) > ta.tf_cosine_similarity(rails_a, ocean)
    assert ta.tf_cosine_similarity(rails_a, ocean) == 0.0
    assert ta.tf_cosine_similarity(rails_a, rails_a) == pytest.approx(1.0)


def test_tf_cosine_similarity_of_texts_without_terms_is_zero() -> None:
    assert ta.tf_cosine_similarity("", "hello world") == 0.0
    assert ta.tf_cosine_similarity("a an the", "a an the") == 0.0


texts = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz     .,!?'-éABC0_"), max_size=120)
vectors = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 1e6, allow_nan=False), max_size=8)


@given(texts, texts)
def test_tf_cosine_similarity_is_a_symmetric_score_in_the_unit_interval(a: str, b: str) -> None:
    score = ta.tf_cosine_similarity(a, b)
    assert 0.0 <= score <= 1.0
    assert score == ta.tf_cosine_similarity(b, a)


@given(texts)
def test_tf_cosine_similarity_of_a_text_with_itself(text: str) -> None:
    expected = 1.0 if ta.word_hash(text) else 0.0
    assert ta.tf_cosine_similarity(text, text) == pytest.approx(expected)


@given(vectors, vectors)
def test_cosine_of_normalized_non_negative_vectors(a: dict[str, float], b: dict[str, float]) -> None:
    na, nb = ta.l2_normalize(a), ta.l2_normalize(b)
    score = ta.cosine_similarity(na, nb)
    assert 0.0 <= score <= 1.0
    assert score == ta.cosine_similarity(nb, na)
    if na:
        assert math.fsum(v * v for v in na.values()) == pytest.approx(1.0)


# --- TF-IDF --------------------------------------------------------------------------------------


def test_fit_learns_smoothed_idf() -> None:
    model = ta.fit(["ruby programming language", "python programming language"])
    assert isinstance(model, ta.TfidfModel)
    assert model.fitted
    assert model.num_documents == 2
    assert model.feature_names == ["rubi", "program", "languag", "python"]
    assert model.vocabulary == {"rubi": 0, "program": 1, "languag": 2, "python": 3}
    assert model.idf["rubi"] == pytest.approx(math.log(3 / 2) + 1)
    assert model.idf["program"] == pytest.approx(1.0)


def test_transform_is_l2_normalized_tf_idf() -> None:
    model = ta.fit(["ruby programming language", "python programming language"])
    vector = ta.transform(model, "Ruby programming, ruby!")
    ruby, program = 2 * (math.log(1.5) + 1), 1.0
    norm = math.hypot(ruby, program)
    assert vector == pytest.approx({"rubi": ruby / norm, "program": program / norm})
    assert all(isinstance(value, float) for value in vector.values())


def test_transform_without_known_terms_is_empty() -> None:
    model = ta.fit(["hello world"])
    assert ta.transform(model, "zzz xyz qqqq") == {}
    assert ta.transform(model, "") == {}
    assert ta.transform(model, None) == {}


def test_tfidf_ranks_related_documents_higher() -> None:
    corpus = [
        "Ruby on Rails is a web framework",
        "ActiveRecord is the Rails ORM layer",
        "The Pacific Ocean covers most of the globe",
    ]
    model = ta.fit(corpus)
    rails, active, ocean = (ta.transform(model, doc) for doc in corpus)
    assert ta.cosine_similarity(rails, active) > ta.cosine_similarity(rails, ocean) == 0.0


def test_fit_rejects_bad_corpora() -> None:
    with pytest.raises(ValueError, match="^documents cannot be empty$"):
        ta.fit([])
    with pytest.raises(TypeError, match="^documents must be an array$"):
        ta.fit("one document")


def test_transform_before_fit_raises() -> None:
    with pytest.raises(RuntimeError, match="has not been fitted"):
        ta.TfidfModel().transform("text")


def test_document_frequency_bounds() -> None:
    corpus = ["apple banana", "apple cherry", "apple banana durian"]
    assert ta.TfidfModel(min_df=2).fit(corpus).feature_names == ["appl", "banana"]
    assert ta.TfidfModel(max_df=0.7).fit(corpus).feature_names == ["banana", "cherri", "durian"]
    assert ta.TfidfModel(min_df=0.5, max_df=2).fit(corpus).feature_names == ["banana"]
    with pytest.raises(ValueError, match="^min_df must be between 0.0 and 1.0$"):
        ta.TfidfModel(min_df=1.5)
    with pytest.raises(ValueError, match="^max_df must be non-negative$"):
        ta.TfidfModel(max_df=-1)
    with pytest.raises(TypeError, match="^min_df must be an Integer or Float$"):
        ta.TfidfModel(min_df="1")  # type: ignore[arg-type]


# --- helpers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (10, "10"),
        (0, "0"),
        (-3, "-3"),
        (0.5, "0.5"),
        (10.0, "10.0"),
        (0.0001, "0.0001"),
        (1e-05, "1.0e-05"),
        (1.5e-07, "1.5e-07"),
        (1e15, "1000000000000000.0"),
        (1e16, "1.0e+16"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
        ("x", "x"),
        (None, "None"),
    ],
)
def test_format_number_renders_like_ruby(value: object, expected: str) -> None:
    assert ta.format_number(value) == expected


def test_ruby_strip_removes_ascii_whitespace_and_nul_only() -> None:
    assert ta.ruby_strip("\x00 \t\n\v\f\rtext \x00") == "text"
    assert ta.ruby_strip("\u00a0text\u2003") == "\u00a0text\u2003"


def test_long_tokens_do_not_recurse() -> None:
    # Porter's "y" rule looks back letter by letter; a long run of "y"s must not blow the stack.
    counts = ta.word_hash("y" * 5000 + " " + "ay" * 3000 + "ed")
    assert len(counts) == 2
