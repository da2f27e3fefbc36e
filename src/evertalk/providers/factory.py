"""Make a provider by kind. The SDKs are imported here, when a provider is made, and not before:
commands that never call a model (status, usage) must not pay for importing them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Provider, ProviderError

if TYPE_CHECKING:
    import httpx2

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"

LOCAL_BASE_URLS: dict[str, str] = {
    "ollama": "http://localhost:11434/v1",
    "llamacpp": "http://localhost:8080/v1",
    "vllm": "http://localhost:8000/v1",
}
"""Each server's usual address, used when no base URL is given."""

LOCAL_API_KEY = "local"
"""Sent to a local server that needs no key (the SDK insists on one). Never the user's OpenAI
key: OPENAI_API_KEY is not read for local servers, so it cannot leak to them."""

KINDS = ("anthropic", "openai", "openrouter", *LOCAL_BASE_URLS)


def make_provider(
    kind: str,
    api_key: str | None,
    base_url: str | None,
    http_client: httpx2.AsyncClient | None = None,
) -> Provider:
    """A provider of `kind`: anthropic, openai, openrouter, ollama, llamacpp or vllm.

    For anthropic and openai, a None key or base URL leaves them to the SDK (ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL). OpenRouter needs its own key (another
    provider's key is never sent there) and defaults to its public URL; local servers take an
    optional key and default to their usual local address.
    """
    if kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(api_key, base_url, http_client=http_client)

    from .openai import OpenAIProvider

    if kind == "openai":
        return OpenAIProvider(api_key, base_url, http_client=http_client)
    if kind == "openrouter":
        if not api_key:
            raise ProviderError("auth", "OpenRouter needs an API key (OPENROUTER_API_KEY)")
        return OpenAIProvider(
            api_key, base_url or OPENROUTER_BASE_URL, http_client=http_client, name="openrouter"
        )
    if kind in LOCAL_BASE_URLS:
        return OpenAIProvider(
            api_key or LOCAL_API_KEY,
            base_url or LOCAL_BASE_URLS[kind],
            http_client=http_client,
            send_cache_key=False,
            name=kind,
        )
    raise ValueError(f"unknown provider kind {kind!r} (one of {', '.join(KINDS)})")
