"""33 - A stock predictor tuned by a robot: numbers from code, judgement from the model.

A price generator publishes fake ticks for the ticker XYZZY on a bus channel (RobotLab's version uses
Redis pub/sub and a second script; here both run in one process). A predictor, plain Python, forecasts
the high and low of the next 12 ticks with an SMA + EMA ensemble. When a window closes, a tuner robot
reads the error and may call its ``adjust_parameters`` tool (values are clamped to safe ranges); each
change it makes is kept with ``learn``, so later windows see what was tried before.

Run it: ``python examples/33_stock_predictor.py`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

import math
import random
from statistics import mean, pstdev

from _offline import llm

import robotlab
from robotlab.bus import Delivery, MessageBus, RobotMessage
from robotlab.testing import tool_call

WINDOW, WINDOWS, WARMUP = 12, 3, 10
params = {"sma_window": 10, "sma_std_multiplier": 1.5, "ema_alpha": 0.2, "ema_vol_multiplier": 2.0, "sma_weight": 0.5}
LIMITS = {"sma_window": (3, 30), "sma_std_multiplier": (0.5, 4.0), "ema_alpha": (0.05, 0.5),
          "ema_vol_multiplier": (0.5, 4.0), "sma_weight": (0.0, 1.0)}


def predict(prices: list[float]) -> tuple[float, float]:
    """The ensemble's (high, low) for the next window."""
    recent = prices[-int(params["sma_window"]):]
    sma, spread = mean(recent), pstdev(recent) * params["sma_std_multiplier"]
    ema, variance = prices[0], 0.0
    for price in prices[1:]:
        delta = price - ema
        ema += params["ema_alpha"] * delta
        variance = params["ema_alpha"] * delta**2 + (1 - params["ema_alpha"]) * variance
    band = math.sqrt(variance) * params["ema_vol_multiplier"]
    weight = params["sma_weight"]
    return (round(weight * (sma + spread) + (1 - weight) * (ema + band), 2),
            round(weight * (sma - spread) + (1 - weight) * (ema - band), 2))


@robotlab.tool
def adjust_parameters(parameter: str, value: float, reasoning: str) -> str:
    """Change one predictor parameter to reduce the prediction error.

    Args:
        parameter: One of sma_window, sma_std_multiplier, ema_alpha, ema_vol_multiplier, sma_weight.
        value: The new value (it is clamped to the parameter's safe range).
        reasoning: Why this change should help.
    """
    if parameter not in LIMITS:
        return f"Unknown parameter '{parameter}'. Valid: {', '.join(LIMITS)}"
    low, high = LIMITS[parameter]
    params[parameter] = round(min(max(float(value), low), high), 2)
    return f"Set {parameter} = {params[parameter]}. {reasoning}"


tuner = robotlab.build(
    name="predictor_tuner", local_tools=[adjust_parameters], max_tool_rounds=2,
    system_prompt="You tune a price-range predictor. Make at most one change per window, or none when the error "
                  "is acceptable. Parameters: " + ", ".join(f"{k} {v[0]}-{v[1]}" for k, v in LIMITS.items()),
    llm=llm(tool_call("adjust_parameters", parameter="ema_alpha", value=0.35,
                      reasoning="The forecast lags the uptrend."), "Made the EMA more reactive.",
            tool_call("adjust_parameters", parameter="ema_vol_multiplier", value=2.5,
                      reasoning="The actual range is wider than the band."), "Widened the EMA band.",
            "No change: one window is too little evidence."),
)

bus = MessageBus()
bus.add_channel("stock:xyzzy", type=RobotMessage)
prices: list[float] = []
window: list[float] = []
forecast: tuple[float, float] | None = None
closed = 0


def on_tick(delivery: Delivery) -> None:
    """The predictor: collects ticks, forecasts, and asks the tuner when a window closes."""
    global forecast, closed
    delivery.ack()
    prices.append(float(delivery.message.content["price"]))
    if forecast is None:
        if len(prices) >= WARMUP:
            forecast = predict(prices)
        return
    window.append(prices[-1])
    if len(window) < WINDOW:
        return
    closed += 1
    high, low = max(window), min(window)
    error = round((abs(forecast[0] - high) + abs(forecast[1] - low)) / 2, 2)
    print(f"window {closed}: predicted {forecast[1]:.2f}-{forecast[0]:.2f}, actual {low:.2f}-{high:.2f}, "
          f"mean error {error:.2f}")
    result = tuner.run(f"Window {closed} closed. Predicted high {forecast[0]} low {forecast[1]}; actual high "
                       f"{high} low {low}; mean error {error}. Parameters: {params}.")
    for change in result.tool_calls:
        tuner.learn(f"window {closed}: {change.data}")
    print(f"  tuner: {result.reply}\n  parameters: {params}")
    window.clear()
    forecast = predict(prices)


bus.subscribe("stock:xyzzy", on_tick)
walk = random.Random(42)
price = 100.0
for tick in range(1, WARMUP + WINDOW * WINDOWS + 1):  # the generator
    price = round(max(1.0, price * (1 + walk.gauss(0.001, 0.01))), 2)
    bus.publish("stock:xyzzy", RobotMessage.build(id=tick, sender="generator", content={"tick": tick, "price": price}))
print(f"{len(prices)} ticks, {closed} windows; the tuner learned: {tuner.learnings}")
