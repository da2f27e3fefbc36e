"""The price table: cost arithmetic, cache multipliers, tiers, unknown models."""

from __future__ import annotations

import pytest

from evertalk.providers.base import Usage
from evertalk.providers.prices import Price, cost, rate


def test_cost_of_input_output_and_cache_at_the_default_multipliers() -> None:
    # Haiku 4.5: $1 in, $5 out; cache read 0.1×, cache write 1.25×
    usage = Usage(input=1_000_000, output=200_000, cache_read=2_000_000, cache_write=400_000)
    expected = 1.0 + 0.2 * 5.0 + 2.0 * 0.1 + 0.4 * 1.25
    assert cost("anthropic", "claude-haiku-4-5", usage) == pytest.approx(expected)


def test_a_model_with_its_own_cache_read_price() -> None:
    usage = Usage(input=0, output=0, cache_read=1_000_000, cache_write=1_000_000)
    # Opus 5.5 reads the cache at $0.20 (0.05×) and writes at 1.25× $4
    assert cost("anthropic", "claude-opus-5-5", usage) == pytest.approx(0.20 + 5.0)


def test_long_prompt_tier() -> None:
    small = Usage(input=50_000, output=1_000)
    large = Usage(input=50_000, output=1_000, cache_read=60_000)
    assert cost("anthropic", "claude-haiku-5-5", small) == pytest.approx(0.05 * 0.10 + 0.001 * 0.50)
    assert cost("anthropic", "claude-haiku-5-5", large) == pytest.approx(
        0.05 * 0.50 + 0.001 * 2.50 + 0.06 * 0.05
    )


def test_snapshot_names_and_unknown_models() -> None:
    assert rate("anthropic", "claude-haiku-4-5-20251001") == rate("anthropic", "claude-haiku-4-5")
    assert rate("openai", "gpt-5-2025-08-07") == rate("openai", "gpt-5")
    assert cost("anthropic", "claude-unknown-9", Usage(input=10)) is None
    assert cost("openrouter", "anthropic/claude-haiku-4-5", Usage(input=10)) is None
    assert cost("ollama", "qwen3", Usage(input=10)) == 0.0  # a local server: free


def test_openai_cost() -> None:
    usage = Usage(input=100_000, output=10_000, cache_read=900_000)
    assert cost("openai", "gpt-5-mini", usage) == pytest.approx(
        0.1 * 0.25 + 0.01 * 2.0 + 0.9 * 0.025
    )


def test_price_defaults() -> None:
    price = Price(2.0, 8.0)
    assert price.read == pytest.approx(0.2)
    assert price.write == pytest.approx(2.5)
    assert cost("openai", "gpt-5", Usage()) == 0.0
