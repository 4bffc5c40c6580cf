"""Prices: what a session cost, from its tokens and the model's price (never a guessed zero)."""

from __future__ import annotations

import pytest

from agentrun.config import Price, parse_config
from agentrun.events import Usage
from agentrun.prices import DEFAULT_PRICES, price_of, with_cost

GPT5 = Price(input=1.25, output=10.0)
GPT5_MINI = Price(input=0.25, output=2.0)
SONNET = Price(input=3.0, output=15.0)
MINE = Price(input=0.5, output=1.5)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5", GPT5),
        ("gpt-5-mini", GPT5_MINI),
        # A dated variant is priced by its longest known prefix, not by the shorter "gpt-5".
        ("gpt-5-mini-2025-08-07", GPT5_MINI),
        ("gpt-5-2025-08-07", GPT5),
        ("claude-sonnet-4-20250514", SONNET),
        # A provider prefix ("openai/", "anthropic/") is not part of the model's name.
        ("openai/gpt-5", GPT5),
        ("openrouter/openai/gpt-5-mini", GPT5_MINI),
    ],
)
def test_default_prices(model: str, expected: Price) -> None:
    assert price_of(model, {}) == expected


@pytest.mark.parametrize("model", ["my-model", "llama3:8b", "gpt", None, ""])
def test_unknown_model_has_no_price(model: str | None) -> None:
    assert price_of(model, {}) is None


def test_configured_price_wins_over_the_default() -> None:
    configured = {"gpt-5": MINE}
    assert price_of("gpt-5", configured) == MINE
    assert price_of("openai/gpt-5", configured) == MINE
    # What is not configured still comes from the defaults.
    assert price_of("gpt-5-mini", configured) == GPT5_MINI


def test_configured_price_for_an_unknown_model() -> None:
    config = parse_config('[prices."my-model"]\ninput = 0.5\noutput = 1.5\n', "test.toml")
    assert config.prices == {"my-model": MINE}
    assert price_of("my-model", config.prices) == MINE
    assert price_of("my-model-2025-01-01", config.prices) == MINE
    assert price_of("other-model", config.prices) is None


def test_configured_price_under_the_full_model_name() -> None:
    """A model configured as ``org/name`` is priced by ``[prices."org/name"]``, as written."""
    configured = {"meta-llama/llama-3-70b": MINE}
    assert price_of("meta-llama/llama-3-70b", configured) == MINE


def test_every_default_price_is_found_by_its_own_name() -> None:
    for name, price in DEFAULT_PRICES.items():
        assert price_of(name, {}) == price, name


def test_with_cost_keeps_a_reported_cost() -> None:
    reported = Usage(tokens_in=1_000_000, tokens_out=1_000_000, cost_usd=0.5)
    assert with_cost(reported, "gpt-5", {}) == reported
    assert with_cost(reported, "unknown-model", {}) == reported


def test_with_cost_computes_from_tokens() -> None:
    used = Usage(tokens_in=2_000, tokens_out=500)
    # 2,000 x $1.25/M + 500 x $10/M
    assert with_cost(used, "gpt-5", {}) == Usage(tokens_in=2_000, tokens_out=500, cost_usd=0.0075)
    assert with_cost(used, "my-model", {"my-model": MINE}).cost_usd == pytest.approx(0.00175)


def test_with_cost_of_no_tokens_on_a_known_model_is_zero() -> None:
    assert with_cost(Usage(), "gpt-5", {}).cost_usd == 0.0


def test_with_cost_leaves_an_unknown_price_unknown() -> None:
    used = Usage(tokens_in=2_000, tokens_out=500)
    assert with_cost(used, "my-model", {}).cost_usd is None
    assert with_cost(used, None, {}).cost_usd is None
