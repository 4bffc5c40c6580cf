"""What a session cost: tokens times the model's price (US dollars per million tokens).

Prices come from ``[prices."MODEL"]`` of ``.agentrun.toml``, else from ``data/prices.json``,
a snapshot of the price table litellm maintains (``scripts/refresh_prices.py`` retakes
it; its source, version and date are in the file). A model is looked up by its exact
name: as written, then without each provider prefix in turn (``openrouter/openai/gpt-5``,
``openai/gpt-5``, ``gpt-5``), and only then without a dated suffix (``-20251101``,
``-2025-08-07``). Nothing else is guessed: a prefix rule priced ``claude-opus-4-5`` as
``claude-opus-4`` (3× too dear) and ``gpt-4.1-nano`` as ``gpt-4.1`` (20×).

A model with no price has an *unknown* cost, never zero: a build with ``max_cost_usd``
then asks a human rather than spend blind. The exception is a local model (an ``openai``
or ``anthropic`` runtime whose ``base_url`` is on loopback): it costs 0 unless priced.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from agentrun.config import Price, RuntimeConfig
from agentrun.events import Usage

# A dated release of a model, priced as its base name when the snapshot lacks the date.
DATED = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
# Anthropic's 5-minute cache write: 1.25× the input rate (the dearest write we price).
CACHE_WRITE_FACTOR = 1.25
# The runtimes that send their requests to ``base_url``.
URL_KINDS = ("openai", "anthropic")
FREE = Price(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0)


@functools.cache
def snapshot() -> tuple[dict[str, Any], dict[str, Price]]:
    """The vendored table: its ``source`` (package, version, date) and a price per model."""
    text = resources.files("agentrun").joinpath("data/prices.json").read_text("utf-8")
    data = json.loads(text)
    return data["source"], {name: Price(**p) for name, p in data["models"].items()}


def names_of(model: str) -> list[str]:
    """The names ``model`` is looked up by, in order: exact ones first, then undated."""
    parts = model.split("/")
    exact = ["/".join(parts[i:]) for i in range(len(parts))]
    undated = [DATED.sub("", name) for name in exact]
    return [name for name in dict.fromkeys(exact + undated) if name]


def price_of(model: str | None, configured: Mapping[str, Price]) -> Price | None:
    """The configured price under any of the model's names, else the snapshot's.

    A configured price wins even over the snapshot's exact entry for a dated variant:
    ``[prices."gpt-5"]`` prices ``gpt-5-2025-08-07`` too.
    """
    if not model:
        return None
    names = names_of(model)
    for table in (configured, snapshot()[1]):
        for name in names:
            if name in table:
                return table[name]
    return None


def is_loopback(base_url: str | None) -> bool:
    """``base_url`` names this machine (127.0.0.0/8, ::1, localhost)."""
    try:
        host = urlsplit(base_url or "").hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local(runtime: RuntimeConfig) -> bool:
    """A model served on this machine: an API runtime whose ``base_url`` is loopback."""
    return runtime.kind in URL_KINDS and is_loopback(runtime.base_url)


def runtime_price(runtime: RuntimeConfig, configured: Mapping[str, Price]) -> Price | None:
    """The price of the runtime's model; a local model that nothing prices is free, so a
    cheap local ladder rung never parks a build with ``max_cost_usd`` as unpriced."""
    price = price_of(runtime.model, configured)
    if price is None and is_local(runtime):
        return FREE
    return price


def cost_of(usage: Usage, price: Price) -> float:
    """Dollars for ``usage``. A cache rate the price leaves out is never priced below what
    a provider bills: a cache read at the input rate (providers bill at most that), a
    cache write at 1.25× it (Anthropic's 5-minute write; OpenAI reports no writes)."""
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input * CACHE_WRITE_FACTOR if price.cache_write is None else price.cache_write
    millionths = (
        usage.tokens_in * price.input
        + usage.tokens_out * price.output
        + usage.cache_read * read
        + usage.cache_write * write
    )
    return round(millionths / 1_000_000, 6)


def with_cost(usage: Usage, price: Price | None) -> Usage:
    """``usage`` with its cost filled in when the runtime did not report one; usage never
    reported stays of unknown cost (its zeros are not a count)."""
    if usage.cost_usd is not None or price is None or not usage.reported:
        return usage
    return usage.model_copy(update={"cost_usd": cost_of(usage, price)})
