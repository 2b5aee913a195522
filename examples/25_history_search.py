"""25 - History search: find the earlier turns of a conversation that match a question.

``robot.search_history(query, limit=...)`` scores each message of the robot's conversation against the
query (stemmed term-frequency cosine similarity) and returns the best ``HistoryResult``s first, each with
its ``score``, ``role``, ``text`` and ``index``. Messages under 20 characters, and messages that share no
word with the query, are left out. The conversation is loaded with ``replace_messages``; no LLM is called.

Run it: ``python examples/25_history_search.py``.
"""

from __future__ import annotations

import robotlab

CONVERSATION = [
    ("user", "What is the capital city of France?"),
    ("assistant", "The capital city of France is Paris, on the Seine."),
    ("user", "How do I rotate python log files every night?"),
    ("assistant", "Use a TimedRotatingFileHandler for nightly log rotation in python."),
    ("user", "Thanks!"),
    ("user", "Which French city hosts the Tour de France finish?"),
    ("assistant", "The Tour de France traditionally finishes in Paris on the Champs-Elysees."),
    ("user", "Can I compress the rotated log files?"),
    ("assistant", "Yes, set a rotator and namer on the handler to gzip each rotated log file."),
]

robot = robotlab.build(name="assistant")
robot.replace_messages([{"role": role, "content": content} for role, content in CONVERSATION])

for query in ("rotating log files", "Paris France", "quantum entanglement"):
    hits = robot.search_history(query, limit=3)
    print(f"search_history({query!r}): {len(hits)} hit(s)")
    for hit in hits:
        print(f"  {hit.score:.2f} [{hit.index}] {hit.role:>9}: {hit.text}")

print(f"'Thanks!' is too short to be indexed: {all(h.text != 'Thanks!' for h in robot.search_history('thanks'))}")
