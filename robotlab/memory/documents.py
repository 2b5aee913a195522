"""Documents kept beside a memory's keys, found by meaning: the ``*_document`` methods of a memory.

:class:`Documents` is a base of :class:`~robotlab.memory.Memory`; the documents live in a
:class:`~robotlab.text.document_store.DocumentStore`, not under memory keys.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:  # imported on first use: a run that keeps no documents does not load the text package
    from ..text.document_store import DocumentStore

__all__ = ["Documents"]


class Documents:
    """The document methods of a :class:`~robotlab.memory.Memory` (see :attr:`document_store`)."""

    _lock: threading.Lock
    _document_store: DocumentStore | None

    @property
    def document_store(self) -> DocumentStore:
        """The :class:`~robotlab.document_store.DocumentStore` of the ``*_document`` methods (not memory keys).

        Created on first use with the lexical embedder; assign a store to use another embedder.
        """
        with self._lock:
            if self._document_store is None:
                from ..text.document_store import DocumentStore

                self._document_store = DocumentStore()
            return self._document_store

    @document_store.setter
    def document_store(self, store: DocumentStore) -> None:
        self._document_store = store

    def store_document(self, key: str, text: str) -> Self:
        """Embed ``text`` and keep it under ``key`` for :meth:`search_documents`; returns ``self``."""
        self.document_store.store(key, text)
        return self

    def search_documents(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """The stored documents most similar to ``query``: ``[{"key", "text", "score"}]``, best first."""
        return self.document_store.search(query, limit)

    def document_keys(self) -> list[str]:
        """The keys of the stored documents."""
        return self.document_store.keys()

    def delete_document(self, key: str) -> Self:
        """Remove the document under ``key``; returns ``self``."""
        self.document_store.delete(key)
        return self
