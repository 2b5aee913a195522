"""26 - The document store: store texts, find the ones closest to a question, answer from them (RAG).

Every memory has a document store: ``memory.store_document(key, text)`` embeds a text and
``memory.search_documents(query, limit=...)`` returns the closest documents with their cosine ``score``.
``DocumentStore`` works on its own too. The default embedder, ``LexicalEmbedder``, needs no model and no
download (it matches stemmed words); ``LiteLLMEmbedder`` or ``SentenceTransformerEmbedder`` match meaning
(see the knowledge guide). The last part passes the best hits to a robot as context.

Run it: ``python examples/26_document_store.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab
from robotlab.text.document_store import DocumentStore

DOCS = {
    "refunds": "Refunds are paid back to the original card within 5 working days of receiving the return.",
    "shipping": "Orders ship within 24 hours from our Lyon warehouse; tracking links arrive by email.",
    "warranty": "Every product has a two-year warranty covering manufacturing defects, not accidental damage.",
    "accounts": "Reset a forgotten password from the login page with the 'Forgot password' link.",
}

memory = robotlab.create_memory()
for key, text in DOCS.items():
    memory.store_document(key, text)
print(f"stored: {memory.document_keys()}")

for query in ("How long until my refund arrives on my card?", "Is accidental damage covered by the warranty?"):
    print(f"search_documents({query!r}):")
    for hit in memory.search_documents(query, limit=2):
        print(f"  {hit['score']:.3f} {hit['key']}: {hit['text'][:60]}")

store = DocumentStore()
store.store_many({"postgres": "Postgres is a relational database with SQL.", "redis": "Redis is a key-value cache."})
best = store.search("SQL database", limit=1)[0]
print(f"standalone store: size={store.size}, best for 'SQL database': {best['key']}")
memory.delete_document("accounts")
print(f"after delete_document('accounts'): {memory.document_keys()}")

question = "When will I get my money back after returning a lamp?"
context = "\n".join(hit["text"] for hit in memory.search_documents(question, limit=2))
support = robotlab.build(name="support", system_prompt="Answer only from the context you are given.",
                         llm=llm("You will get your refund on your original card within 5 working days."))
result = support.run(f"Context:\n{context}\n\nQuestion: {question}")
print(f"RAG answer: {result.reply}")
