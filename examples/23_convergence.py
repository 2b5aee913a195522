"""23 - Convergence: tell when two robots reached the same conclusion, and skip the tie-breaker.

``Convergence.similarity`` scores two texts from 1.0 (identical) down to near 0 (unrelated), and
``Convergence.is_detected`` compares the score with a threshold. The router fast path: two verifier robots
check a claim in parallel; the network's router activates the expensive reconciler only when they
disagree.

Run it: ``python examples/23_convergence.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from typing import Any

from _offline import llm

import robotlab
from robotlab.network import create_network
from robotlab.text.convergence import Convergence

BASE = "The outage was caused by an expired TLS certificate on the payment gateway."
PAIRS = {
    "identical": BASE,
    "same conclusion": "An expired TLS certificate on the payment gateway caused the outage.",
    "same topic": "The payment gateway outage lasted forty minutes and affected card payments.",
    "unrelated": "Our quarterly marketing budget will be spent on video advertising.",
}
print("similarity to:", BASE)
for label, other in PAIRS.items():
    score = Convergence.similarity(BASE, other)
    print(f"  {label:<16} {score:.2f}  converged={Convergence.is_detected(BASE, other, threshold=0.6)}")
print(f"  (texts under {Convergence.MIN_TEXT_LENGTH} characters score 0.0: "
      f"{Convergence.similarity('Same.', 'Same.')})")

THRESHOLD = 0.6
CASES = {
    "verifiers agree": (
        "Verified: the outage was caused by an expired TLS certificate on the payment gateway.",
        "Verified: an expired TLS certificate on the payment gateway caused the outage.",
    ),
    "verifiers disagree": (
        "Verified: the outage was caused by an expired TLS certificate on the payment gateway.",
        "Not verified: the logs point to database connection pool exhaustion after the deploy.",
    ),
}


def route(result: Any) -> str | None:
    first, second = result.context.get("verifier_a"), result.context.get("verifier_b")
    if first is None or second is None or "reconciler" in result.context:
        return None
    if Convergence.is_detected(first.reply, second.reply, threshold=THRESHOLD):
        return None  # fast path: they agree, the reconciler is not needed
    return "reconcile"


for case, (reply_a, reply_b) in CASES.items():
    network = create_network(name="verification", router=route)
    claim = "Claim: the outage was caused by an expired TLS certificate. Verify it from the incident notes."
    network.task("verify_a", robotlab.build(name="verifier_a", system_prompt="Verify the claim.", llm=llm(reply_a)))
    network.task("verify_b", robotlab.build(name="verifier_b", system_prompt="Verify the claim.", llm=llm(reply_b)))
    network.task("reconcile", robotlab.build(
        name="reconciler", system_prompt="Two verifiers disagree. Decide which is right.",
        llm=llm("The certificate expired first; pool exhaustion followed. Root cause: the certificate."),
    ), depends_on="optional")
    result = network.run(claim)
    score = Convergence.similarity(reply_a, reply_b)
    ran = "reconciler ran" if "reconciler" in result.context else "reconciler skipped"
    print(f"{case}: similarity {score:.2f} -> {ran}; final: {result.value.reply}")
