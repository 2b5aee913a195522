"""TF and TF-IDF primitives shared by convergence, history search and compression, and MCP discovery.

RobotLab (Ruby) builds these on the ``classifier`` gem. This module ports the parts it uses:

* :func:`word_hash` gives stemmed, stop-word-filtered term counts, the gem's ``String#word_hash``
  tokenizer (see below for the one part left out by default).
* :class:`TfidfModel` is ``Classifier::TFIDF`` (smoothed IDF, L2-normalized output).
* :func:`fit`, :func:`transform`, :func:`cosine_similarity`, :func:`dot`, :func:`l2_normalize` and
  :func:`tf_cosine_similarity` are RobotLab's ``TextAnalysis`` module functions.

Tokenizing, as the gem does it: every character that is neither an ASCII word character
(``[A-Za-z0-9_]``, Ruby's ``\\w``) nor ASCII whitespace is deleted (so ``"don't"`` becomes ``"dont"``
and ``"café"`` becomes ``"caf"``), the text is split on whitespace and each word is lower-cased. A
word is skipped when it is in :data:`CORPUS_SKIP_WORDS` or is two characters or shorter (the gem keeps
``length > 2``, its ``min_word_length`` of 3). A kept word is counted under its Porter stem.

Punctuation: the gem's ``word_hash`` also counts every run of non-word characters (``"."``, ``","``,
``"?"``, ``"-"``, ``"é"``...) as a term of its own. Those shared "terms" lift unrelated texts to
0.15-0.35 (two questions share ``"?"``), against the seeds' description of the scores ("stemmed term
frequencies"; unrelated below 0.10-0.15), so they are left out by default: ``word_hash(text)`` is the
gem's ``clean_word_hash``. ``word_hash(text, symbols=True)`` is the gem's ``word_hash`` exactly.

The stemmer is the Porter stemmer from ``snowballstemmer`` (``"porter"``, the published 1980
algorithm) with the two departures of Martin Porter's C implementation that the gem's ``fast-stemmer``
wraps: ``-bli`` becomes ``-ble`` (``"possibly"`` -> ``"possibl"``, like ``"possible"``) and ``-logi``
becomes ``-log`` (``"technology"`` -> ``"technolog"``); and, as the published algorithm says, step 1b
undoubles every final double consonant but l, s and z (``"trekking"`` -> ``"trek"``), where the
snowball program lists only some of them. Stems are cached, and each thread has its own stemmer
object (snowball stemmers keep state while they work).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from types import ModuleType
from typing import Any

from .._ruby import format_number
from .._ruby import strip as ruby_strip
from ..errors import DependencyError

__all__ = [
    "CORPUS_SKIP_WORDS",
    "TfidfModel",
    "clean_word_hash",
    "cosine_similarity",
    "dot",
    "fit",
    "format_number",
    "l2_normalize",
    "load_classifier",
    "require_classifier",
    "ruby_strip",
    "stem",
    "tf_cosine_similarity",
    "transform",
    "word_hash",
]

#: The gem's ``String::CORPUS_SKIP_WORDS``, checked against the lower-cased word before stemming.
#: (``"sinc"`` and ``"th"`` are in the gem's list too; with the length rule ``"th"`` can never matter.)
# fmt: off
CORPUS_SKIP_WORDS: frozenset[str] = frozenset({
    "a", "again", "all", "along", "are", "also", "an", "and", "as", "at", "but", "by", "came", "can",
    "cant", "couldnt", "did", "didn", "didnt", "do", "doesnt", "dont", "ever", "first", "from", "have",
    "her", "here", "him", "how", "i", "if", "in", "into", "is", "isnt", "it", "itll", "just", "last",
    "least", "like", "most", "my", "new", "no", "not", "now", "of", "on", "or", "should", "sinc", "so",
    "some", "th", "than", "this", "that", "the", "their", "then", "those", "to", "told", "too", "true",
    "try", "until", "url", "us", "were", "when", "whether", "while", "with", "within", "yes", "you",
    "youll",
})
# fmt: on

_INSTALL_HINT = (
    "The 'snowballstemmer' package is required for text analysis features. "
    "Install it with: pip install 'snowballstemmer>=2.2'"
)

# Ruby's \w and \s are ASCII-only: [A-Za-z0-9_] and [ \t\n\v\f\r].
_NOT_WORD_OR_SPACE = re.compile(r"[^\w\s]", re.ASCII)
_WORD_CHAR = re.compile(r"\w", re.ASCII)
_SYMBOL_RUN = re.compile(r"[^ \t\n\v\f\r]+")


# --- the stemmer ---------------------------------------------------------------------------------


def load_classifier() -> ModuleType:
    """Import the stemmer package (Ruby ``load_classifier_gem``); kept apart so tests can replace it."""
    import snowballstemmer

    module: ModuleType = snowballstemmer
    return module


def require_classifier() -> None:
    """Make sure the stemmer can be loaded (Ruby ``require_classifier!``).

    ``snowballstemmer`` is a hard dependency of ``robotlab``, so this only fails in a broken install.

    Raises:
        DependencyError: the package cannot be imported; the message says how to install it.
    """
    try:
        load_classifier()
    except ImportError:
        raise DependencyError(_INSTALL_HINT) from None


_local = threading.local()


def _stemmer() -> Any:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        try:
            module = load_classifier()
        except ImportError:
            raise DependencyError(_INSTALL_HINT) from None
        stemmer = _local.stemmer = module.stemmer("porter")
    return stemmer


def _consonants(word: str) -> list[bool]:
    """Porter's consonant test per letter: not a vowel, and "y" only at the start or after a vowel."""
    flags: list[bool] = []
    for i, char in enumerate(word):
        flags.append(char not in "aeiou" and (char != "y" or i == 0 or not flags[i - 1]))
    return flags


def _measure(word: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``[C](VC){m}[V]``."""
    m = 0
    previous_vowel = False
    for consonant in _consonants(word):
        if consonant and previous_vowel:
            m += 1
        previous_vowel = not consonant
    return m


# Step 1b undoubles a final double consonant other than l, s and z once "ed"/"ing" is removed; the
# snowball "porter" program lists only bb dd ff gg mm nn pp rr tt, so the rest (cc, kk, vv, 00, __...)
# are handled here.
_UNLISTED_DOUBLE = re.compile(r"(.*([^aeioulszbdfgmnprt])\2)(?:ed|ing)")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of a lower-case word, as the gem's ``String#stem`` (fast-stemmer) computes it."""
    match = _UNLISTED_DOUBLE.fullmatch(word)
    if match:
        base = match.group(1)
        flags = _consonants(base)
        if flags[-1] and not all(flags):
            # Steps 1a and 1b cannot apply again to a word ending in one of these letters.
            return _porter(base[:-1])
    return _porter(word)


def _porter(word: str) -> str:
    stemmer = _stemmer()
    result: str = stemmer.stemWord(word)
    # Martin Porter's C implementation departs from the published algorithm in step 2: "bli" -> "ble"
    # (instead of "abli" -> "able") and "logi" -> "log". The published algorithm leaves both endings
    # untouched through steps 3-5, so finishing them here gives the C result. (A word ending in "e"
    # reached "bli"/"logi" only in step 5, after step 2 had passed it by.)
    if word.endswith("e"):
        return result
    if result.endswith("bli") and _measure(result[:-3]) > 0:
        result = stemmer.stemWord(result[:-3] + "ble")
    elif result.endswith("logi") and _measure(result[:-4]) > 0:
        result = result[:-1]
    return result


# --- word hashes ---------------------------------------------------------------------------------


def _text(text: object) -> str:
    if text is None:
        return ""
    return text if isinstance(text, str) else str(text)


def clean_word_hash(text: object) -> dict[str, int]:
    """Stemmed, stop-word-filtered word counts (Ruby ``String#clean_word_hash``)."""
    counts: dict[str, int] = {}
    for raw in _NOT_WORD_OR_SPACE.sub("", _text(text)).split():
        word = raw.lower()
        if len(word) > 2 and word not in CORPUS_SKIP_WORDS:
            key = stem(word)
            counts[key] = counts.get(key, 0) + 1
    return counts


def word_hash(text: object, *, symbols: bool = False) -> dict[str, int]:
    """Term counts of ``text``: stemmed words without stop words and words of two letters or fewer.

    With ``symbols=True`` each run of punctuation is counted too, as the gem's ``String#word_hash``
    does (see the module's docs for why that is off by default).

    >>> word_hash("The robots are running, and the robot runs!")
    {'robot': 2, 'run': 2}
    >>> word_hash("The robots are running, and the robot runs!", symbols=True)
    {'robot': 2, 'run': 2, ',': 1, '!': 1}
    """
    text = _text(text)
    counts = clean_word_hash(text)
    if symbols:
        for symbol in _SYMBOL_RUN.findall(_WORD_CHAR.sub(" ", text)):
            counts[symbol] = counts.get(symbol, 0) + 1
    return counts


# --- vectors -------------------------------------------------------------------------------------


def dot(vec_a: Mapping[str, float], vec_b: Mapping[str, float]) -> float:
    """The dot product over the keys both vectors share (exactly rounded: symmetric in its arguments)."""
    if len(vec_b) < len(vec_a):
        vec_a, vec_b = vec_b, vec_a
    return float(math.fsum(value * vec_b[key] for key, value in vec_a.items() if key in vec_b))


def l2_normalize(vec: Mapping[str, float]) -> dict[str, float]:
    """``vec`` scaled to unit length; ``{}`` when its magnitude is zero (or it is empty)."""
    magnitude = math.sqrt(math.fsum(value * value for value in vec.values()))
    if magnitude == 0:
        return {}
    return {key: float(value) / magnitude for key, value in vec.items()}


def cosine_similarity(vec_a: Mapping[str, float], vec_b: Mapping[str, float]) -> float:
    """Cosine of two L2-normalized vectors: their dot product capped at 1.0; 0.0 if either is empty."""
    if not vec_a or not vec_b:
        return 0.0
    return min(dot(vec_a, vec_b), 1.0)


def tf_cosine_similarity(text_a: object, text_b: object) -> float:
    """Stemmed term-frequency cosine of two texts, in [0.0, 1.0]; needs no reference corpus.

    Raises:
        DependencyError: the stemmer package is missing.
    """
    require_classifier()
    return cosine_similarity(l2_normalize(word_hash(text_a)), l2_normalize(word_hash(text_b)))


# --- TF-IDF --------------------------------------------------------------------------------------


class TfidfModel:
    """A TF-IDF vectorizer (Ruby ``Classifier::TFIDF``, unigrams, raw term frequency).

    ``idf[term] = ln((N + 1) / (df + 1)) + 1`` over the ``N`` fitted documents; a term is in the
    vocabulary when its document frequency lies within ``[min_df, max_df]`` (an ``int`` is a count, a
    ``float`` a proportion of ``N``). Documents are tokenized with :func:`clean_word_hash`.
    """

    def __init__(self, *, min_df: int | float = 1, max_df: int | float = 1.0) -> None:
        self._validate_df(min_df, "min_df")
        self._validate_df(max_df, "max_df")
        self.min_df = min_df
        self.max_df = max_df
        self.vocabulary: dict[str, int] = {}
        self.idf: dict[str, float] = {}
        self.num_documents = 0
        self._fitted = False

    @staticmethod
    def _validate_df(value: object, name: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} must be an Integer or Float")
        if isinstance(value, float) and not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be between 0.0 and 1.0")
        if isinstance(value, int) and value < 0:
            raise ValueError(f"{name} must be non-negative")

    @property
    def fitted(self) -> bool:
        """Whether :meth:`fit` has run."""
        return self._fitted

    @property
    def feature_names(self) -> list[str]:
        """The vocabulary's terms in index order."""
        return list(self.vocabulary)

    def _bounds(self, n: int) -> tuple[float, float]:
        low = math.ceil(self.min_df * n) if isinstance(self.min_df, float) else self.min_df
        high = math.floor(self.max_df * n) if isinstance(self.max_df, float) else self.max_df
        return low, high

    def fit(self, documents: Iterable[Any]) -> TfidfModel:
        """Learn the vocabulary and IDF weights from ``documents``; returns ``self``.

        Raises:
            TypeError: ``documents`` is a single string rather than a list of them.
            ValueError: ``documents`` is empty.
        """
        if isinstance(documents, str | bytes):
            raise TypeError("documents must be an array")
        docs = list(documents)
        if not docs:
            raise ValueError("documents cannot be empty")
        frequencies: dict[str, int] = {}
        for doc in docs:
            for term in clean_word_hash(doc):
                frequencies[term] = frequencies.get(term, 0) + 1
        n = len(docs)
        low, high = self._bounds(n)
        self.num_documents = n
        self.vocabulary = {}
        self.idf = {}
        for term, df in frequencies.items():
            if low <= df <= high:
                self.vocabulary[term] = len(self.vocabulary)
                self.idf[term] = math.log((n + 1) / (df + 1)) + 1
        self._fitted = True
        return self

    def transform(self, document: object) -> dict[str, float]:
        """The L2-normalized TF-IDF vector of ``document``; ``{}`` when it has no known term.

        Raises:
            RuntimeError: the model has not been fitted.
        """
        if not self._fitted:
            raise RuntimeError("TFIDF has not been fitted. Call fit first.")
        weights = {
            term: float(count) * self.idf[term]
            for term, count in clean_word_hash(document).items()
            if term in self.vocabulary
        }
        return l2_normalize(weights) if weights else {}

    def __repr__(self) -> str:
        return f"TfidfModel(num_documents={self.num_documents}, vocabulary_size={len(self.vocabulary)})"


def fit(corpus: Iterable[Any]) -> TfidfModel:
    """Fit a TF-IDF model (``min_df=1``) over a list of document strings."""
    return TfidfModel(min_df=1).fit(corpus)


def transform(model: TfidfModel, text: object) -> dict[str, float]:
    """The L2-normalized TF-IDF vector of ``text`` under ``model``; ``{}`` when it has no known term."""
    return model.transform(_text(text)) or {}
