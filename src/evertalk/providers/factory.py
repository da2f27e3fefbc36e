"""Make a provider by kind. The SDKs are imported here, when a provider is made, and not before:
commands that never call a model (status, usage) must not pay for importing them.

Every provider made here tries a call again after a transient error (`retry.RetryingProvider`),
with the SDK's own retries off: one policy for turns and compactions, a cut stream retried too,
each retry said, and a refused connection reported at once rather than after seconds of backoff.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from evertalk.config import LOCAL_API_KEY as LOCAL_API_KEY

from .base import Provider, ProviderError

if TYPE_CHECKING:
    import httpx2

    from .retry import RetryPolicy

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"

LOCAL_BASE_URLS: dict[str, str] = {
    "ollama": "http://localhost:11434/v1",
    "llamacpp": "http://localhost:8080/v1",
    "vllm": "http://localhost:8000/v1",
}
"""Each server's usual address, used when no base URL is given."""

KINDS = ("anthropic", "openai", "openrouter", *LOCAL_BASE_URLS)


def load_sdk(kind: str) -> None:
    """Import the SDK that providers of `kind` use (seconds of work, most of it building the
    SDK's types): done ahead, in a worker thread, by a service that will soon call a model."""
    importlib.import_module(".anthropic" if kind == "anthropic" else ".openai", __package__)


def make_provider(
    kind: str,
    api_key: str | None,
    base_url: str | None,
    http_client: httpx2.AsyncClient | None = None,
    *,
    retry: RetryPolicy | None = None,
) -> Provider:
    """A provider of `kind`: anthropic, openai, openrouter, ollama, llamacpp or vllm, whose
    calls are tried again by `retry` (default: `RetryPolicy.from_env()`).

    For anthropic and openai, a None key or base URL leaves them to the SDK (ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL). OpenRouter needs its own key (another
    provider's key is never sent there) and defaults to its public URL; local servers take an
    optional key (else the placeholder `LOCAL_API_KEY`; never the user's OpenAI key, as
    OPENAI_API_KEY is not read for them) and default to their usual local address.
    """
    from .retry import RetryingProvider, RetryPolicy

    policy = retry or RetryPolicy.from_env()
    return RetryingProvider(_adapter(kind, api_key, base_url, http_client), policy)


def _adapter(
    kind: str, api_key: str | None, base_url: str | None, http_client: httpx2.AsyncClient | None
) -> Provider:
    """The adapter alone, the SDK's own retries off (the wrapper retries)."""
    if kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(api_key, base_url, http_client=http_client, max_retries=0)

    from .openai import OpenAIProvider

    if kind == "openai":
        return OpenAIProvider(api_key, base_url, http_client=http_client, max_retries=0)
    if kind == "openrouter":
        if not api_key:
            raise ProviderError("auth", "OpenRouter needs an API key (OPENROUTER_API_KEY)")
        return OpenAIProvider(
            api_key,
            base_url or OPENROUTER_BASE_URL,
            http_client=http_client,
            max_retries=0,
            name="openrouter",
        )
    if kind in LOCAL_BASE_URLS:
        return OpenAIProvider(
            api_key or LOCAL_API_KEY,
            base_url or LOCAL_BASE_URLS[kind],
            http_client=http_client,
            max_retries=0,
            send_cache_key=False,
            empty_content=True,  # llama-cpp-python refuses a null content with an HTTP 500
            name=kind,
        )
    raise ValueError(f"unknown provider kind {kind!r} (one of {', '.join(KINDS)})")
