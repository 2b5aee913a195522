"""What a model call costs, in USD: litellm's price map, or prices given per million tokens.

Both transports price their answers here. :func:`cost` asks litellm (importing it on first use);
:func:`price_per_token` looks a model's prices up once and caches them, for the direct client, which
prices every answer itself; :func:`cost_from_prices` applies ``(input, output)`` prices per million
tokens, as the direct client's ``pricing=`` gives them.
"""

from __future__ import annotations

from typing import Any

from ._litellm import load_litellm

__all__ = ["cost", "cost_from_prices", "price_per_token"]

_prices: dict[str, tuple[float, float]] = {}


def cost(model: str, input_tokens: int, output_tokens: int, known: Any = None) -> float:
    """The price of a call from litellm's price map; ``known`` (litellm's own figure) wins when it is set.

    Args:
        model: The model's litellm name (``"openai/gpt-4o-mini"``).
        input_tokens: Prompt tokens of the call.
        output_tokens: Completion tokens of the call.
        known: The cost litellm already reported for the response, if any.

    Returns:
        The cost in USD; 0.0 for a model litellm has no price for.
    """
    if isinstance(known, int | float) and (known or not (input_tokens or output_tokens)):
        return float(known)  # litellm already priced the response
    litellm = load_litellm()
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
        return float(prompt + completion)
    except Exception:  # unknown models have no price
        return 0.0


def price_per_token(model: str) -> tuple[float, float]:
    """USD per input and per output token from litellm's price map, looked up once per model."""
    if model not in _prices:
        _prices[model] = (cost(model, 1000, 0) / 1000, cost(model, 0, 1000) / 1000)
    return _prices[model]


def cost_from_prices(input_tokens: int, output_tokens: int, pricing: tuple[float, float]) -> float:
    """The cost of a call at ``pricing`` = ``(input, output)`` USD per million tokens."""
    return (input_tokens * pricing[0] + output_tokens * pricing[1]) / 1e6
