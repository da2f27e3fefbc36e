"""Our SDK adapters pointed at a fake, in-process: the provider the turn, retry and compactor
tests build on the real SDKs."""

from __future__ import annotations

from typing import Literal

from starlette.types import ASGIApp

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Provider
from evertalk.providers.factory import make_provider
from evertalk.providers.openai import OpenAIProvider
from evertalk.providers.retry import RetryPolicy
from home_config import API_KEY

from .openai_fake import OpenAIFake
from .servers import IN_PROCESS_URL, async_client

Kind = Literal["anthropic", "openai", "llamacpp"]


def provider_for(
    fake: ASGIApp,
    *,
    kind: Kind | None = None,
    key: str = API_KEY,
    max_retries: int = 0,
    retry: RetryPolicy | None = None,
) -> Provider:
    """The adapter of `kind` (by default the fake's own API) talking to `fake` in-process.
    `max_retries`: the SDK's own retries; `retry`: wrapped in our retry policy instead, as
    evertalk makes its providers. `llamacpp` is a local OpenAI-compatible server."""
    client = async_client(fake)
    kind = kind or ("openai" if isinstance(fake, OpenAIFake) else "anthropic")
    url = IN_PROCESS_URL if kind == "anthropic" else f"{IN_PROCESS_URL}/v1"
    if retry is not None:
        return make_provider(kind, key, url, client, retry=retry)
    if kind == "anthropic":
        return AnthropicProvider(key, url, http_client=client, max_retries=max_retries)
    local = kind == "llamacpp"
    return OpenAIProvider(
        key,
        url,
        http_client=client,
        max_retries=max_retries,
        send_cache_key=not local,
        name="llamacpp" if local else "openai",
    )
