"""What a model call costs, in USD: litellm's price table, or prices given per million tokens.

Both transports price their answers here. :func:`cost` takes litellm's own figure when the response has one, else the
model's per-token prices, which :func:`price_per_token` looks up once per model and caches (never per call);
:func:`cost_from_prices` applies ``(input, output)`` prices per million tokens, as the direct client's ``pricing=``
gives them.

Where a price comes from, so that the direct transport never needs litellm for it:

* litellm's price table read as data (:mod:`robotlab.llm.price_table`): the installed litellm's own prices,
  without importing litellm (which takes seconds);
* litellm itself, once this process imported it (a project that registers models or prices with
  ``litellm.register_model``, sets callbacks, or runs any request through litellm: its prices are what litellm
  says), when ``LITELLM_LOCAL_MODEL_COST_MAP`` asks for litellm's fresh map from the network, or for a model
  the table does not hold under that name but litellm may still price
  (:func:`~robotlab.llm.price_table.litellm_can_price`);
* else the model has no price: 0.0, as litellm would say.
"""

from __future__ import annotations

import os
import sys

from . import price_table
from ._litellm import load_litellm

__all__ = ["cost", "cost_from_prices", "litellm_decides", "litellm_prices", "price_per_token"]

_prices: dict[tuple[str, bool], tuple[float, float]] = {}


def cost(model: str, input_tokens: int, output_tokens: int, known: object = None) -> float:
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
    if not (input_tokens or output_tokens):
        return 0.0
    per_input, per_output = price_per_token(model)
    return input_tokens * per_input + output_tokens * per_output


def _litellm_cost(model: str, input_tokens: int, output_tokens: int) -> float:
    litellm = load_litellm()
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
        return float(prompt + completion)
    except Exception:  # unknown models have no price
        return 0.0


def litellm_prices(model: str) -> tuple[float, float]:
    """USD per input and per output token as litellm's ``cost_per_token`` gives them (imports litellm)."""
    return _litellm_cost(model, 1000, 0) / 1000, _litellm_cost(model, 0, 1000) / 1000


def litellm_decides() -> bool:
    """Whether litellm itself prices every model rather than its table read as data.

    So it does once imported (the prices registered with it count) or when asked to fetch a newer map than the
    one installed (``LITELLM_LOCAL_MODEL_COST_MAP`` set to other than ``true``).
    """
    return "litellm" in sys.modules or os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "true").lower() != "true"


def price_per_token(model: str) -> tuple[float, float]:
    """USD per input and per output token, looked up once per model (see the module docstring for where)."""
    via_litellm = litellm_decides()
    key = (model, via_litellm)
    prices = _prices.get(key)
    if prices is None:
        prices = _prices[key] = _look_up(model, via_litellm)
    return prices


def _look_up(model: str, via_litellm: bool) -> tuple[float, float]:
    if not via_litellm:
        known = price_table.known_prices(model)
        if known is not None:
            return known.input, known.output
        if not price_table.litellm_can_price(model):
            return 0.0, 0.0
    return litellm_prices(model)


def cost_from_prices(input_tokens: int, output_tokens: int, pricing: tuple[float, float]) -> float:
    """The cost of a call at ``pricing`` = ``(input, output)`` USD per million tokens."""
    return (input_tokens * pricing[0] + output_tokens * pricing[1]) / 1e6
