"""Convergence detection: have two texts reached the same conclusion?

The usual use is a router that skips an expensive reconciler when two verifiers already agree::

    from robotlab.text.convergence import Convergence

    if Convergence.is_detected(verifier_a_reply, verifier_b_reply):
        ...  # the verifiers agree; no reconciler needed

:meth:`Convergence.similarity` is the stemmed term-frequency cosine of the two texts
(:func:`~robotlab.text.analysis.tf_cosine_similarity`; no IDF, which on a two-document corpus would
zero out exactly the shared terms). Typical scores: identical texts 1.0, the same conclusion worded
differently 0.60-0.85, the same topic 0.30-0.60, unrelated texts below 0.15.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import ClassVar

from .. import _ruby
from . import analysis as text_analysis

__all__ = ["Convergence"]


class Convergence:
    """Agreement detection between two texts (Ruby ``RobotLab::Convergence``)."""

    #: Similarity at or above which two texts are convergent.
    DEFAULT_THRESHOLD: ClassVar[float] = 0.85
    #: Characters (after stripping); a shorter text always scores 0.0.
    MIN_TEXT_LENGTH: ClassVar[int] = 30

    @staticmethod
    def similarity(text_a: object, text_b: object) -> float:
        """Stemmed term-frequency cosine similarity of two texts, in [0.0, 1.0].

        ``None`` counts as an empty text. Either text shorter than :attr:`MIN_TEXT_LENGTH` after
        stripping scores 0.0, so two short identical strings score zero, not one.

        Raises:
            DependencyError: the stemmer package is missing.
        """
        a = _ruby.strip("" if text_a is None else str(text_a))
        b = _ruby.strip("" if text_b is None else str(text_b))
        if len(a) < Convergence.MIN_TEXT_LENGTH or len(b) < Convergence.MIN_TEXT_LENGTH:
            return 0.0
        return text_analysis.tf_cosine_similarity(a, b)

    @staticmethod
    def is_detected(text_a: object, text_b: object, threshold: float = DEFAULT_THRESHOLD) -> bool:
        """Whether the two texts' :meth:`similarity` is at least ``threshold`` (Ruby ``detected?``).

        Raises:
            ValueError: ``threshold`` is not a number in [0.0, 1.0]
                (``"threshold must be in [0.0, 1.0], got 1.5"``).
            DependencyError: the stemmer package is missing.
        """
        valid = (
            isinstance(threshold, Real)
            and not isinstance(threshold, bool)
            and not math.isnan(threshold)
            and 0.0 <= threshold <= 1.0
        )
        if not valid:
            raise ValueError(f"threshold must be in [0.0, 1.0], got {_ruby.format_number(threshold)}")
        return Convergence.similarity(text_a, text_b) >= threshold
