"""Cost of calls from the price table (per model, the price of 1M input and 1M output tokens),
with the tokens the endpoint reported. A model without a price has no cost (None), never a
cost of zero said as if it were known."""

from __future__ import annotations

from collections.abc import Mapping

from eval_pipelines.core.chat.settings import ModelPrice


def call_cost(
    prices: Mapping[str, ModelPrice], model: str, input_tokens: int, output_tokens: int
) -> float | None:
    """``input_tokens * input/1e6 + output_tokens * output/1e6`` at ``model``'s price."""
    price = prices.get(model)
    if price is None:
        return None
    return (
        input_tokens * price.input_per_million + output_tokens * price.output_per_million
    ) / 1_000_000
