"""Text relevance: term frequencies and TF-IDF, and what is built on them.

* :mod:`robotlab.text.analysis`: stemmed term counts, TF and TF-IDF vectors, cosine similarity
  (documented as :mod:`robotlab.text_analysis`).
* :mod:`robotlab.text.convergence`: :class:`Convergence`, whether two texts reached the same conclusion.
* :mod:`robotlab.text.history_search`: :func:`search_history` over a conversation.
* :mod:`robotlab.text.compression`: :class:`HistoryCompressor`, pruning a conversation by relevance.
* :mod:`robotlab.text.embeddings`: embedders that turn texts into vectors (lexical, sentence-transformers,
  litellm).
* :mod:`robotlab.text.document_store`: :class:`DocumentStore`, passages found by meaning.
"""

from __future__ import annotations

from .compression import HistoryCompressor
from .convergence import Convergence
from .document_store import DocumentStore
from .embeddings import Embedder, LexicalEmbedder, LiteLLMEmbedder, SentenceTransformerEmbedder
from .history_search import HistoryResult, search_history

__all__ = [
    "Convergence",
    "DocumentStore",
    "Embedder",
    "HistoryCompressor",
    "HistoryResult",
    "LexicalEmbedder",
    "LiteLLMEmbedder",
    "SentenceTransformerEmbedder",
    "search_history",
]
