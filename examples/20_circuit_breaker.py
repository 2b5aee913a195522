"""20 - The circuit breaker: stop a runaway tool loop with ``max_tool_rounds``.

A step processor always answers "more steps remain", which would keep a model calling it forever. With
``max_tool_rounds=3`` the fourth call is not run and the run raises ``ToolLoopError``
(``Circuit breaker triggered: 4 tool calls exceeded max_tool_rounds (3)``). The example catches it, shows
that the conversation stayed valid, and runs the same robot again.

Run it: ``python examples/20_circuit_breaker.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab
from robotlab.testing import tool_call

calls = 0


@robotlab.tool
def process_step(step: int) -> str:
    """Process one step of the job and say what is left.

    Args:
        step: The number of the step to process, starting at 1.
    """
    global calls
    calls += 1
    return f"Step {step} done. More steps remain: call process_step with step {step + 1}."


robot = robotlab.build(
    name="worker",
    system_prompt="Process the job with process_step until no steps remain.",
    local_tools=[process_step],
    max_tool_rounds=3,
    llm=llm(*(tool_call("process_step", step=n) for n in range(1, 6)), "Hello! The endless job is set aside."),
)

try:
    robot.run("Process the whole job.")
    print("the run finished without tripping the breaker")
except robotlab.ToolLoopError as error:
    print(f"caught ToolLoopError: {error}")
    print(f"retryable: {robotlab.errors.is_retryable(error)}; the tool ran {calls} times")

print(f"last history entry: {robot.messages[-1]['content']}")
again = robot.run("Forget the job. Just say hello.", tools="none")
print(f"the robot still works: {again.reply}")
