"""DocumentStore: keep texts under keys and find the ones closest in meaning to a query.

A lightweight retrieval store (RobotLab's ``DocumentStore``): each stored text is embedded once
and kept in memory as a unit vector; a search embeds the query and ranks every document by cosine
similarity::

    store = DocumentStore()
    store.store("doc_a", "Ruby on Rails is a full-stack web framework.")
    store.store("doc_b", "Postgres is an advanced relational database.")
    store.search("relational database SQL", limit=2)[0]["key"]   # -> "doc_b"

The embedder decides what "close" means (see :mod:`robotlab.text.embeddings`): the default
:class:`~robotlab.text.embeddings.LexicalEmbedder` matches stemmed words;
:class:`~robotlab.text.embeddings.SentenceTransformerEmbedder` and
:class:`~robotlab.text.embeddings.LiteLLMEmbedder` match meaning. ``Memory.store_document`` and
``Memory.search_documents`` use one of these stores.
"""

from __future__ import annotations

import asyncio
import heapq
import operator
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .embeddings import Embedder, LexicalEmbedder, normalize

__all__ = ["DocumentStore"]


def _check(key: object, text: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"Document keys must be str, got {type(key).__name__}: {key!r}")
    if not isinstance(text, str):
        raise TypeError(f"Document text must be str, got {type(text).__name__}")


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, got {limit!r}")
    return limit


class DocumentStore:
    """Texts under ``str`` keys, searchable by similarity (thread-safe).

    Args:
        embedder: turns texts into vectors (an :class:`~robotlab.text.embeddings.Embedder`); by default
            a :class:`~robotlab.text.embeddings.LexicalEmbedder`. Passages go through its
            ``embed_documents`` and queries through its ``embed_query``.

    Storing under an existing key replaces the document (it keeps its place in :meth:`keys`).
    Every vector of one store must have the same size. :meth:`search` scores are cosine
    similarities clipped to ``0.0..1.0``, highest first; equal scores keep storing order.
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder: Embedder = embedder if embedder is not None else LexicalEmbedder()
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}
        self._vectors: dict[str, list[float]] = {}

    def __repr__(self) -> str:
        return f"<DocumentStore size={self.size} embedder={self.embedder!r}>"

    # ---- writing -----------------------------------------------------------------------------

    def store(self, key: str, text: str) -> DocumentStore:
        """Embed ``text`` and keep it under ``key`` (replacing any document there); returns ``self``.

        Raises:
            TypeError: ``key`` or ``text`` is not a ``str``.
            ValueError: the vector's size differs from the vectors already stored.
        """
        return self.store_many({key: text})

    def store_many(self, documents: Mapping[str, str] | Iterable[tuple[str, str]]) -> DocumentStore:
        """:meth:`store` several ``key -> text`` pairs with one ``embed_documents`` call; returns ``self``."""
        pairs = list(documents.items() if isinstance(documents, Mapping) else documents)
        for key, text in pairs:
            _check(key, text)
        if pairs:
            self._add(pairs, self.embedder.embed_documents([text for _, text in pairs]))
        return self

    async def astore(self, key: str, text: str) -> DocumentStore:
        """:meth:`store` for coroutines: the embedder's ``aembed_documents`` when it has one."""
        return await self.astore_many({key: text})

    async def astore_many(self, documents: Mapping[str, str] | Iterable[tuple[str, str]]) -> DocumentStore:
        """:meth:`store_many` for coroutines."""
        pairs = list(documents.items() if isinstance(documents, Mapping) else documents)
        for key, text in pairs:
            _check(key, text)
        if pairs:
            texts = [text for _, text in pairs]
            aembed = getattr(self.embedder, "aembed_documents", None)
            if aembed is not None:
                vectors = await aembed(texts)
            else:
                vectors = await asyncio.to_thread(self.embedder.embed_documents, texts)
            self._add(pairs, vectors)
        return self

    def _add(self, pairs: list[tuple[str, str]], vectors: Sequence[Sequence[float]]) -> None:
        if len(vectors) != len(pairs):
            raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(pairs)} documents")
        rows = [normalize(vector) for vector in vectors]
        with self._lock:
            size = len(next(iter(self._vectors.values()), rows[0]))
            for row in rows:
                if len(row) != size:
                    raise ValueError(f"embedding has {len(row)} dimensions; the store's vectors have {size}")
            for (key, text), row in zip(pairs, rows, strict=True):
                self._texts[key] = text
                self._vectors[key] = row

    def delete(self, key: str) -> DocumentStore:
        """Remove the document under ``key`` (nothing happens when there is none); returns ``self``."""
        with self._lock:
            self._texts.pop(key, None)
            self._vectors.pop(key, None)
        return self

    def clear(self) -> DocumentStore:
        """Remove every document; returns ``self``."""
        with self._lock:
            self._texts.clear()
            self._vectors.clear()
        return self

    # ---- reading -----------------------------------------------------------------------------

    def search(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """The ``limit`` documents most similar to ``query``: ``[{"key", "text", "score"}]``, best first.

        An empty store (or ``limit <= 0``) gives ``[]`` without embedding the query.
        """
        if _check_limit(limit) <= 0 or self.is_empty:
            return []
        return self._rank(self.embedder.embed_query(query), limit)

    async def asearch(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """:meth:`search` for coroutines: the embedder's ``aembed_query`` when it has one."""
        if _check_limit(limit) <= 0 or self.is_empty:
            return []
        aembed = getattr(self.embedder, "aembed_query", None)
        if aembed is not None:
            vector = await aembed(query)
        else:
            vector = await asyncio.to_thread(self.embedder.embed_query, query)
        return self._rank(vector, limit)

    def _rank(self, vector: Sequence[float], limit: int) -> list[dict[str, Any]]:
        query = normalize(vector)
        nonzero = [(i, w) for i, w in enumerate(query) if w]
        sparse = len(nonzero) * 4 < len(query)  # hashed term vectors: skip the zeros
        mul = operator.mul
        with self._lock:
            rows = list(self._vectors.items())
            texts = dict(self._texts)
        scored: list[tuple[float, str]] = []
        for key, row in rows:
            if len(row) != len(query):
                raise ValueError(
                    f"query embedding has {len(query)} dimensions; the documents have {len(row)}"
                )
            score = sum(row[i] * w for i, w in nonzero) if sparse else sum(map(mul, row, query))
            scored.append((min(max(score, 0.0), 1.0), key))
        best = heapq.nlargest(limit, scored, key=operator.itemgetter(0))
        return [{"key": key, "text": texts[key], "score": score} for score, key in best]

    def get(self, key: str) -> str | None:
        """The text stored under ``key``, or ``None``."""
        with self._lock:
            return self._texts.get(key)

    def keys(self) -> list[str]:
        """The keys, in storing order."""
        with self._lock:
            return list(self._texts)

    @property
    def size(self) -> int:
        """How many documents are stored."""
        with self._lock:
            return len(self._texts)

    def __len__(self) -> int:
        return self.size

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._texts

    @property
    def is_empty(self) -> bool:
        """Whether no document is stored."""
        return self.size == 0
