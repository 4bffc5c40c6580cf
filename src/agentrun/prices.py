"""What a session cost: tokens times the model's price (US dollars per million tokens).

A price in ``[prices."MODEL"]`` of ``.agentrun.toml`` wins over these defaults. A model
with no price has an *unknown* cost, never zero: a build with ``max_cost_usd`` then
asks a human rather than spend blind.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentrun.config import Price
from agentrun.events import Usage

# Published list prices (input, output) per million tokens; prefixes match dated variants.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4": Price(input=15.0, output=75.0),
    "claude-sonnet-4": Price(input=3.0, output=15.0),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0),
    "claude-3-5-sonnet": Price(input=3.0, output=15.0),
    "claude-haiku-4": Price(input=1.0, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, output=4.0),
    "gpt-5-mini": Price(input=0.25, output=2.0),
    "gpt-5-nano": Price(input=0.05, output=0.4),
    "gpt-5": Price(input=1.25, output=10.0),
    "gpt-4.1-mini": Price(input=0.4, output=1.6),
    "gpt-4.1": Price(input=2.0, output=8.0),
    "gpt-4o-mini": Price(input=0.15, output=0.6),
    "gpt-4o": Price(input=2.5, output=10.0),
    "o4-mini": Price(input=1.1, output=4.4),
    "o3": Price(input=2.0, output=8.0),
}


def price_of(model: str | None, configured: Mapping[str, Price]) -> Price | None:
    """An exact name first (configured, then default), then the longest prefix of either.

    The full name is tried before the one without its provider ("openai/gpt-5").
    """
    if not model:
        return None
    names = dict.fromkeys([model, model.rpartition("/")[2]])
    for name in names:
        for table in (configured, DEFAULT_PRICES):
            if name in table:
                return table[name]
    for name in names:
        # The longest prefix wins, so "gpt-5-mini-2025-08-07" is not priced as "gpt-5";
        # on a tie the configured price does.
        found = [(len(k), 1, p) for k, p in configured.items() if name.startswith(k)]
        found += [(len(k), 0, p) for k, p in DEFAULT_PRICES.items() if name.startswith(k)]
        if found:
            return max(found, key=lambda item: (item[0], item[1]))[2]
    return None


def with_cost(usage: Usage, model: str | None, configured: Mapping[str, Price]) -> Usage:
    """``usage`` with its cost filled in when the runtime did not report one."""
    if usage.cost_usd is not None:
        return usage
    price = price_of(model, configured)
    if price is None:
        return usage
    cost = (usage.tokens_in * price.input + usage.tokens_out * price.output) / 1_000_000
    return usage.model_copy(update={"cost_usd": round(cost, 6)})
