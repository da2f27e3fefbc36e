"""A small price table, USD per million tokens, for the usage ledger.

Cache reads cost 0.1× the input price and 5-minute cache writes 1.25×, unless a model's own
figures differ (several current models read the cache for less). A model not in the table costs
None: an unknown price is never guessed. Prices as published in October 2026; some models price a
long prompt higher, from a threshold counted over the whole prompt (cache reads and writes
included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import Usage

CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float | None = None  # None: CACHE_READ_FACTOR × input
    cache_write: float | None = None  # None: CACHE_WRITE_FACTOR × input

    @property
    def read(self) -> float:
        return self.cache_read if self.cache_read is not None else CACHE_READ_FACTOR * self.input

    @property
    def write(self) -> float:
        if self.cache_write is not None:
            return self.cache_write
        return CACHE_WRITE_FACTOR * self.input


@dataclass(frozen=True)
class Rate:
    price: Price
    long: Price | None = None  # the price of a prompt above `threshold` tokens
    threshold: int = 0

    def for_prompt(self, prompt_tokens: int) -> Price:
        if self.long is not None and prompt_tokens > self.threshold:
            return self.long
        return self.price


ANTHROPIC: dict[str, Rate] = {
    "claude-fable-5-1": Rate(Price(10.0, 50.0, cache_read=0.25)),
    "claude-fable-5": Rate(Price(10.0, 50.0, cache_read=1.0)),
    "claude-opus-5-5": Rate(Price(4.0, 20.0, cache_read=0.20)),
    "claude-opus-5": Rate(Price(5.0, 25.0)),
    "claude-opus-4-8": Rate(Price(5.0, 25.0)),
    "claude-opus-4-7": Rate(Price(5.0, 25.0)),
    "claude-opus-4-6": Rate(Price(5.0, 25.0)),
    "claude-opus-4-5": Rate(Price(5.0, 25.0)),
    "claude-sonnet-5-5": Rate(Price(2.0, 10.0)),
    "claude-sonnet-5": Rate(Price(2.0, 10.0)),
    "claude-sonnet-4-6": Rate(Price(3.0, 15.0)),
    "claude-sonnet-4-5": Rate(Price(3.0, 15.0)),
    "claude-haiku-5-5": Rate(
        Price(0.10, 0.50, cache_read=0.01),
        long=Price(0.50, 2.50, cache_read=0.05),
        threshold=100_000,
    ),
    "claude-haiku-4-5": Rate(Price(1.0, 5.0)),
}

OPENAI: dict[str, Rate] = {
    "gpt-6-astra": Rate(Price(10.0, 50.0, cache_read=1.0)),
    "gpt-6-sol": Rate(
        Price(2.0, 10.0, cache_read=0.20),
        long=Price(4.0, 15.0, cache_read=0.40),
        threshold=272_000,
    ),
    "gpt-6-luna": Rate(
        Price(0.10, 0.50, cache_read=0.01),
        long=Price(0.20, 0.75, cache_read=0.02),
        threshold=272_000,
    ),
    "gpt-5.5": Rate(Price(5.0, 30.0)),
    "gpt-5": Rate(Price(1.25, 10.0)),
    "gpt-5-mini": Rate(Price(0.25, 2.0)),
    "gpt-5-nano": Rate(Price(0.05, 0.40)),
}

TABLES: dict[str, dict[str, Rate]] = {"anthropic": ANTHROPIC, "openai": OPENAI}

_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def rate(provider: str, model: str) -> Rate | None:
    """The rate of a model, by its name or the name without a dated snapshot suffix
    (`claude-haiku-4-5-20251001`, `gpt-5-2025-08-07`)."""
    table = TABLES.get(provider)
    if table is None:
        return None
    return table.get(model) or table.get(_SNAPSHOT.sub("", model))


LOCAL_SERVERS = frozenset({"ollama", "llamacpp", "vllm"})
"""Providers that run on the user's own machine: their calls cost nothing we could know of."""


def cost(provider: str, model: str, usage: Usage) -> float | None:
    """The price of one call in USD, or None when the model's price is unknown."""
    if provider in LOCAL_SERVERS:
        return 0.0
    found = rate(provider, model)
    if found is None:
        return None
    price = found.for_prompt(usage.prompt)
    total = (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * price.read
        + usage.cache_write * price.write
    )
    return total / 1_000_000
