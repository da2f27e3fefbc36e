"""The provider's SDK is loaded at the first call, in a worker thread, once."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evertalk.providers.base import Message, Provider, ProviderError, Request, Text, collect
from evertalk.providers.lazy import LazyProvider
from fakes import IN_PROCESS_URL, AnthropicFake, async_client
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def request() -> Request:
    return Request("claude-haiku-4-5", [Text("system")], [], [Message("user", [Text("hi")])], 100)


async def test_made_once_at_the_first_call_off_the_event_loop() -> None:
    from evertalk.providers.anthropic import AnthropicProvider

    fake = AnthropicFake(answer("hello"))
    threads: list[threading.Thread] = []

    def make() -> Provider:
        threads.append(threading.current_thread())
        return AnthropicProvider(
            "sk-ant-test-1234567890", IN_PROCESS_URL, http_client=async_client(fake)
        )

    lazy = LazyProvider("anthropic", make)
    assert lazy.name == "anthropic" and not lazy.made
    assert (await collect(lazy, request())).text == "hello"
    assert (await collect(lazy, request())).text == "hello"
    await lazy.aclose()
    assert len(threads) == 1 and threads[0] is not threading.main_thread()


async def test_an_error_making_it_is_the_calls_error() -> None:
    def make() -> Provider:
        raise ProviderError("auth", "OpenRouter needs an API key (OPENROUTER_API_KEY)")

    with pytest.raises(ProviderError) as raised:
        await collect(LazyProvider("openrouter", make), request())
    assert raised.value.kind == "auth"


def test_a_runtimes_provider_loads_no_sdk_until_it_is_called(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'provider = "anthropic"\napi_key = "sk-ant-x-123456789"\n'
    )
    code = (
        "import sys; from pathlib import Path; from evertalk.runtime import Runtime; "
        f"p = Runtime.load(Path({str(tmp_path)!r})).provider(); "
        "print(p.name, 'anthropic' in sys.modules, 'openai' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["anthropic", "False", "False"]
