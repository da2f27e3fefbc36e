"""make_provider: kinds, defaults, and SDKs imported only when a provider is made."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evertalk.config import LOCAL_API_KEY
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Provider, ProviderError
from evertalk.providers.factory import make_provider
from evertalk.providers.openai import OpenAIProvider
from evertalk.providers.retry import DELAY_VARIABLE, RetryingProvider, RetryPolicy


def test_sdks_are_imported_only_when_a_provider_is_made() -> None:
    code = (
        "import sys\n"
        "import evertalk.providers, evertalk.providers.base, evertalk.providers.factory\n"
        "import evertalk.providers.layout, evertalk.providers.prices, evertalk.providers.errors\n"
        "heavy = ('anthropic', 'openai', 'httpx2', 'anyio')\n"
        "assert not [m for m in heavy if m in sys.modules], sys.modules.keys() & set(heavy)\n"
        "from evertalk.providers.factory import make_provider\n"
        "make_provider('ollama', None, None)\n"
        "assert 'openai' in sys.modules and 'anthropic' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def adapter(provider: Provider) -> Provider:
    """The adapter inside a provider `make_provider` made: every one retries."""
    assert isinstance(provider, RetryingProvider)
    return provider.inner


def test_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    anthropic = make_provider("anthropic", "k", None)
    assert isinstance(adapter(anthropic), AnthropicProvider) and anthropic.name == "anthropic"
    openai = make_provider("openai", "k", None)
    assert isinstance(adapter(openai), OpenAIProvider) and openai.name == "openai"
    assert "api.openai.com" in repr(openai)
    router = make_provider("openrouter", "k", None)
    assert router.name == "openrouter" and "openrouter.ai/api/v1" in repr(router)
    for kind in ("ollama", "llamacpp", "vllm"):
        local = make_provider(kind, None, "http://127.0.0.1:9/v1")
        assert local.name == kind and "127.0.0.1:9" in repr(local)


def test_the_sdks_own_retries_are_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper retries, and says so: the SDK's silent retries (and their backoff from a
    refused connection) would come on top of it."""
    monkeypatch.setenv(DELAY_VARIABLE, "0.25")
    for kind in ("anthropic", "openai", "openrouter", "ollama"):
        provider = make_provider(kind, "sk-some-key-123", "http://127.0.0.1:9/v1")
        inner = adapter(provider)
        assert isinstance(inner, AnthropicProvider | OpenAIProvider)
        assert inner._client.max_retries == 0
        assert isinstance(provider, RetryingProvider) and provider.policy.base_delay == 0.25
    chosen = RetryPolicy(tries=2)
    provider = make_provider("anthropic", "k", None, retry=chosen)
    assert isinstance(provider, RetryingProvider) and provider.policy is chosen


def test_local_servers_never_get_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    local = adapter(make_provider("ollama", None, None))
    assert isinstance(local, OpenAIProvider)
    assert local._client.api_key == LOCAL_API_KEY


def test_openrouter_needs_its_own_key() -> None:
    with pytest.raises(ProviderError) as info:
        make_provider("openrouter", None, None)
    assert info.value.kind == "auth"


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown provider kind"):
        make_provider("gemini", "k", None)
