"""Prices: what a session cost, from its tokens and the model's price (never a guessed zero).

The table is the vendored snapshot of litellm's (``data/prices.json``); models are looked
up by exact name, after a provider prefix, and fall back only from a dated suffix.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, payloads
from runtimes.test_api_runtimes import KEY, VERIFY, builder, config_for
from support.model_server import ModelServer

from agentrun.commands.build import create_build, run_build
from agentrun.config import Price, RuntimeConfig, parse_config
from agentrun.events import Usage
from agentrun.prices import (
    FREE,
    is_loopback,
    names_of,
    price_of,
    runtime_price,
    snapshot,
    with_cost,
)

ROOT = Path(__file__).resolve().parent.parent
REFRESH = ROOT / "scripts" / "refresh_prices.py"
GPT5 = Price(input=1.25, output=10.0, cache_read=0.125)
OPUS = Price(input=5.0, output=25.0, cache_read=0.5, cache_write=6.25)
MINE = Price(input=0.5, output=1.5)


def test_every_model_in_the_snapshot_is_priced_by_its_own_entry() -> None:
    source, models = snapshot()
    assert (source["package"], source["unit"]) == ("litellm", "US dollars per million tokens")
    assert source["version"] and source["taken"] and source["wheel_sha256"]
    assert len(models) > 1000
    assert "src/agentrun/data/prices.json" in (ROOT / "NOTICE").read_text()
    for name, price in models.items():
        assert price_of(name, {}) is price, name


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # The prefix rule priced these as claude-opus-4 ($15/$75), gpt-5 and gpt-4.1.
        *((f"claude-opus-4-{minor}", OPUS) for minor in (5, 6, 7, 8)),
        ("gpt-5-pro", Price(input=15.0, output=120.0)),
        ("gpt-4.1-nano", Price(input=0.1, output=0.4, cache_read=0.025)),
        ("gpt-5", GPT5),
    ],
)
def test_variants_are_priced_as_themselves(model: str, expected: Price) -> None:
    assert price_of(model, {}) == expected


def test_a_dated_suffix_falls_back_to_its_base_name() -> None:
    models = snapshot()[1]
    assert "claude-opus-4-8-20261201" not in models and "gpt-5-pro-2099-01-31" not in models
    assert price_of("claude-opus-4-8-20261201", {}) == OPUS
    assert price_of("gpt-5-pro-2099-01-31", {}) == price_of("gpt-5-pro", {})
    # A dated name the snapshot has is its own entry.
    assert price_of("claude-opus-4-5-20251101", {}) is models["claude-opus-4-5-20251101"]


@pytest.mark.parametrize(
    "model",
    [
        "gpt-5-preview",  # not a date: no fallback to gpt-5
        "gpt-5-2025",
        "claude-opus-4",  # not a prefix of anything priced
        "gpt",
        "my-model",
        "llama3:8b",
        "",
        None,
    ],
)
def test_an_unknown_model_has_no_price(model: str | None) -> None:
    assert price_of(model, {}) is None


def test_a_provider_prefix_is_not_part_of_the_name() -> None:
    assert names_of("openrouter/openai/gpt-5-2025-08-07") == [
        "openrouter/openai/gpt-5-2025-08-07",
        "openai/gpt-5-2025-08-07",
        "gpt-5-2025-08-07",
        "openrouter/openai/gpt-5",
        "openai/gpt-5",
        "gpt-5",
    ]
    assert price_of("openai/gpt-5", {}) == GPT5
    assert price_of("anthropic/claude-opus-4-5", {}) == OPUS
    assert price_of("anthropic/claude-opus-4-7-20260101", {}) == OPUS


def test_a_configured_price_wins() -> None:
    configured = {"gpt-5": MINE}
    assert price_of("gpt-5", configured) == MINE
    assert price_of("openai/gpt-5", configured) == MINE
    # Even over the snapshot's own entry for a dated variant.
    assert "gpt-5-2025-08-07" in snapshot()[1]
    assert price_of("gpt-5-2025-08-07", configured) == MINE
    # What is not configured still comes from the snapshot.
    assert price_of("gpt-5-pro", configured) == Price(input=15.0, output=120.0)


def test_a_configured_price_for_an_unknown_model() -> None:
    text = '[prices."my-model"]\ninput = 0.5\noutput = 1.5\ncache_read = 0.05\n'
    config = parse_config(text, "test.toml")
    mine = Price(input=0.5, output=1.5, cache_read=0.05)
    assert config.prices == {"my-model": mine}
    assert price_of("my-model", config.prices) == mine
    assert price_of("my-model-2025-01-01", config.prices) == mine
    assert price_of("my-model-large", config.prices) is None
    # Under the full name as written, too.
    assert price_of("meta-llama/llama-3-70b", {"meta-llama/llama-3-70b": MINE}) == MINE


def test_with_cost_keeps_a_reported_cost() -> None:
    reported = Usage(tokens_in=1_000_000, tokens_out=1_000_000, cost_usd=0.5)
    assert with_cost(reported, GPT5) == reported
    assert with_cost(reported, None) == reported


def test_with_cost_prices_each_kind_of_token_at_its_own_rate() -> None:
    used = Usage(tokens_in=2_000, tokens_out=500, cache_read=10_000, cache_write=4_000)
    # 2,000 x $5/M + 500 x $25/M + 10,000 x $0.50/M + 4,000 x $6.25/M
    assert with_cost(used, OPUS).cost_usd == pytest.approx(0.0525)
    assert with_cost(Usage(tokens_in=2_000, tokens_out=500), GPT5).cost_usd == 0.0075


def test_a_cache_rate_left_out_is_never_cheaper_than_a_provider_bills() -> None:
    """Reads at the input rate, writes at 1.25x it (Anthropic's 5-minute write)."""
    used = Usage(cache_read=1_000_000, cache_write=1_000_000)
    # $0.50 for the reads, $0.625 for the writes.
    assert with_cost(used, MINE).cost_usd == pytest.approx(1.125)


def test_with_cost_of_no_tokens_is_zero_unless_unreported() -> None:
    assert with_cost(Usage(), GPT5).cost_usd == 0.0
    assert with_cost(Usage(reported=False), GPT5).cost_usd is None


def test_with_cost_leaves_an_unknown_price_unknown() -> None:
    assert with_cost(Usage(tokens_in=2_000, tokens_out=500), None).cost_usd is None


# --- local models -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.1.2.3:11434", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("http://localhost.example.com/v1", False),
        ("127.0.0.1:8080", False),  # no scheme: not a URL the runtime can use
        ("http://[::1", False),
        (None, False),
    ],
)
def test_loopback_urls(url: str | None, loopback: bool) -> None:
    assert is_loopback(url) is loopback


def test_a_local_model_costs_nothing_unless_priced() -> None:
    local = RuntimeConfig(kind="openai", base_url="http://127.0.0.1:11434/v1", model="qwen3")
    assert runtime_price(local, {}) == FREE
    assert runtime_price(local, {"qwen3": MINE}) == MINE
    # A local proxy to a priced model is priced as that model.
    assert runtime_price(local.model_copy(update={"model": "gpt-5"}), {}) == GPT5
    # A model elsewhere, or a runtime that does not talk to base_url, stays unknown.
    remote = local.model_copy(update={"base_url": "https://llm.example.com/v1"})
    assert runtime_price(remote, {}) is None
    assert runtime_price(RuntimeConfig(kind="aider", base_url=local.base_url), {}) is None


def test_a_local_rung_does_not_park_a_build_with_max_cost_as_unpriced(
    repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``openai`` runtime on 127.0.0.1 playing an unpriced model, under max_cost_usd."""
    monkeypatch.setenv(KEY, "k-test-123")
    with ModelServer(builder) as server:
        runtimes = config_for("openai", server.url, name="local")
        base = f'[roles]\ndefault = ["local"]\n\n{runtimes}\n[budget]\nmax_cost_usd = 0.01\n'
        configure(repo_path, extra=VERIFY, base=base)
        slug = create_build(repo, "Greet the world").slug
        outcome = run_build(repo, slug)

    assert (outcome.waiting, outcome.state.state_name) == ("complete", "complete")
    assert outcome.state.unpriced_models == ()
    ended = payloads(repo, slug, "session.ended")
    assert [e.usage.cost_usd for e in ended] == [0.0] * 4
    assert all(e.usage.tokens for e in ended)


# --- the refresh script -------------------------------------------------------------------


def fake_wheel(path: Path, licence: str = "MIT") -> Path:
    table = {
        "sample_spec": {"mode": "one of: chat, ...", "input_cost_per_token": 0.0},
        "chat-model": {
            "mode": "chat",
            "input_cost_per_token": 3e-06,
            "output_cost_per_token": 1.5e-05,
            "cache_read_input_token_cost": 3e-07,
            "cache_creation_input_token_cost": 3.75e-06,
        },
        "responses-model": {
            "mode": "responses",
            "input_cost_per_token": 1.5e-05,
            "output_cost_per_token": 0.00012,
        },
        "embedding-model": {"mode": "embedding", "input_cost_per_token": 1e-07},
        "no-output-price": {"mode": "chat", "input_cost_per_token": 1e-07},
    }
    meta = f"Metadata-Version: 2.4\nName: litellm\nVersion: 9.9.9\nLicense-Expression: {licence}\n"
    wheel = path / "litellm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("litellm/model_prices_and_context_window_backup.json", json.dumps(table))
        archive.writestr("litellm-9.9.9.dist-info/METADATA", meta)
    return wheel


def refresh(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REFRESH), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_the_refresh_script_keeps_the_text_models_four_figures_each(tmp_path: Path) -> None:
    out = tmp_path / "prices.json"
    done = refresh("--wheel", fake_wheel(tmp_path), "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}: 2 models from litellm 9.9.9\n"
    data = json.loads(out.read_text())
    assert data["source"]["version"] == "9.9.9"
    assert data["models"] == {
        "chat-model": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
        "responses-model": {"input": 15.0, "output": 120.0},
    }


def test_the_refresh_script_refuses_a_wheel_under_another_licence(tmp_path: Path) -> None:
    out = tmp_path / "prices.json"
    done = refresh("--wheel", fake_wheel(tmp_path, licence="LicenseRef-Other"), "--out", out)
    assert done.returncode == 1
    assert "expected litellm under MIT, found 'litellm' under 'LicenseRef-Other'" in done.stderr
    assert not out.exists()
