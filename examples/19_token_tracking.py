"""19 - Token and cost tracking: what each run used, and the running totals.

Shows ``result.input_tokens`` / ``result.output_tokens`` / ``result.cost`` for each run, the robot's
running totals ``total_input_tokens`` / ``total_output_tokens``, ``reset_token_totals()`` to start a new
batch, and a cost estimate from per-million-token prices (litellm's own price, ``result.cost``, is used
when it knows the model).

Run it: ``python examples/19_token_tracking.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab
from robotlab.testing import text

PRICE_PER_MILLION = {"input": 0.15, "output": 0.60}  # USD, in the range of a small hosted model


def estimate(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * PRICE_PER_MILLION["input"] + output_tokens * PRICE_PER_MILLION["output"]) / 1_000_000


robot = robotlab.build(
    name="tutor",
    system_prompt="You explain computing ideas in two sentences.",
    llm=llm(
        text("A compiler translates a whole program before it runs; an interpreter runs it line by line.",
             usage=(38, 21)),
        text("Recursion is a function calling itself on a smaller piece of the problem until a base case.",
             usage=(81, 22)),
        text("A hash map stores values under keys and finds them in constant time on average.", usage=(40, 18)),
    ),
)


def ask(question: str) -> None:
    result = robot.run(question)
    cost = result.cost or estimate(result.input_tokens, result.output_tokens)
    print(f"  {question:<28} {result.input_tokens:>5} in {result.output_tokens:>4} out  ${cost:.6f}")


print("batch 1")
ask("Compiler or interpreter?")
ask("What is recursion?")
print(f"  totals: {robot.total_input_tokens} in, {robot.total_output_tokens} out, "
      f"about ${estimate(robot.total_input_tokens, robot.total_output_tokens):.6f}")

robot.reset_token_totals().clear_messages()
print(f"after reset_token_totals(): {robot.total_input_tokens} in, {robot.total_output_tokens} out")

print("batch 2")
ask("What is a hash map?")
print(f"  totals: {robot.total_input_tokens} in, {robot.total_output_tokens} out")
